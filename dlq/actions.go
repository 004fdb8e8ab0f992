package dlq

import (
	"encoding/json"
	"fmt"
	"time"
)

// StateError says a dead letter is not in the state an action needs: it was
// already replayed (ReplayJobID names the job) or discarded, or, for
// restore, it is not discarded. It matches ErrConflict under errors.Is.
type StateError struct {
	Letter DeadLetter
	Action string
}

func (e *StateError) Error() string {
	l := e.Letter
	switch {
	case l.ReplayJobID != nil:
		return fmt.Sprintf("dead letter %d was already replayed as job %d", l.ID, *l.ReplayJobID)
	case l.DiscardedAt != nil:
		return fmt.Sprintf("dead letter %d is discarded; restore it before you %s it", l.ID, e.Action)
	default:
		return fmt.Sprintf("dead letter %d is %s; it cannot be %s", l.ID, l.Status, PastTense(e.Action))
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *StateError) Is(target error) bool { return target == ErrConflict }

// As finds a StateError as an Error coded EConflict.
func (e *StateError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

// PastTense is how an audit entry or a message says an action was done:
// "replayed", "discarded".
func PastTense(action string) string {
	switch action {
	case "restore":
		return "restored"
	case "discard":
		return "discarded"
	default:
		return action + "ed"
	}
}

// ReplayParams asks for one dead letter to be replayed.
type ReplayParams struct {
	ID    int64
	Actor Actor
	// Args and Kwargs, when set, replace the letter's (edit and replay); the
	// audit entry keeps both versions.
	Args, Kwargs json.RawMessage
	Reason       string
	// Target is where, from when and with how many attempts the replay
	// runs; zero: as the letter's job ran, now.
	Target ReplayTarget
	// Now is the time recorded in the audit entry.
	Now time.Time
	// Key, when set, makes the replay happen once however often it is sent.
	Key string
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	JobID int64 `json:"replay_job_id"`
	// Source is where JobID runs when it is not Redrive's own queue (a
	// River source: its job, retried there); empty for Redrive's.
	Source  string `json:"source,omitempty"`
	AuditID int64  `json:"audit_event_id"`
	// Repeated is true when the key had been used: nothing was done again,
	// and the fields above are the first result.
	Repeated bool `json:"-"`
}

// DiscardParams asks for one dead letter to be discarded (kept, hidden from
// pending, restorable).
type DiscardParams struct {
	ID     int64
	Actor  Actor
	Reason string
	Now    time.Time
	Key    string // one-time key, as in ReplayParams
	// DeleteInSource also deletes the letter's job in the source it came
	// from (a River job), which otherwise keeps it.
	DeleteInSource bool
}

// RestoreParams asks for a discarded letter to be pending again.
type RestoreParams struct {
	ID     int64
	Actor  Actor
	Reason string
	Now    time.Time
	Key    string // one-time key, as in ReplayParams
}
