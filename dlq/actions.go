package dlq

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
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
		return fmt.Sprintf("dead letter %d is %s; it cannot be %s", l.ID, l.Status, pastTense(e.Action))
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *StateError) Is(target error) bool { return target == ErrConflict }

// As finds a StateError as an Error coded EConflict.
func (e *StateError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

func pastTense(action string) string {
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
	// RunAt delays the replayed job; zero means now.
	RunAt time.Time
	// Now is the time recorded in the audit entry.
	Now time.Time
	// Key, when set, makes the replay happen once however often it is sent.
	Key string
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	JobID   int64 `json:"replay_job_id"`
	AuditID int64 `json:"audit_event_id"`
	// Repeated is true when the key had been used: nothing was done again,
	// and the fields above are the first result.
	Repeated bool `json:"-"`
}

const letterSQL = `SELECT ` + deadLetterColumns + ` FROM dead_letters WHERE id = $1`

// claimPendingSQL is the guard of a replay or a discard: it deletes the
// letter's pending row, so of two actions racing for a letter (a bulk
// batch among them) only the one whose DELETE removed the row goes on; the
// other's DELETE waits for it, then finds nothing (claimLetter).
const claimPendingSQL = `DELETE FROM pending_dead_letters WHERE id = $1`

// The outcomes, written once the letter is claimed (the letter's own row is
// never rewritten: 00101_letters.sql).
const (
	insertReplayedSQL = `
INSERT INTO dead_letter_outcomes (dead_letter_id, failed_at, task, queue, replayed_at, replayed_by, replay_job_id)
VALUES ($1, $2, $3, $4, now(), $5, $6)`
	insertDiscardedSQL = `
INSERT INTO dead_letter_outcomes (dead_letter_id, failed_at, task, queue, discarded_at, discarded_by, discard_reason)
VALUES ($1, $2, $3, $4, now(), $5, $6)`
)

// ReplayDeadLetter enqueues a fresh job from the letter (same task, queue,
// args and kwargs unless edited; attempts reset; replay_of set), marks the
// letter replayed and writes the audit entry, all in one transaction. A
// letter already replayed or discarded yields a *StateError.
func (s *Store) ReplayDeadLetter(ctx context.Context, p ReplayParams) (ReplayResult, error) {
	var res ReplayResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		action := ActionReplay
		if p.Args != nil || p.Kwargs != nil {
			action = ActionEditReplay
		}
		hash := requestHash(action, p.ID, canonJSON(p.Args), canonJSON(p.Kwargs), p.Reason, p.RunAt)
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, action, hash, &res, func() error {
			var err error
			res, err = replayInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	return res, err
}

func replayInTx(ctx context.Context, tx *sqlx.Tx, p ReplayParams) (ReplayResult, error) {
	var l DeadLetter
	if err := tx.GetContext(ctx, &l, letterSQL, p.ID); err != nil {
		return ReplayResult{}, fmt.Errorf("dead letter %d: %w", p.ID, translate(err))
	}
	if l.Status != StatusPending {
		return ReplayResult{}, &StateError{Letter: l, Action: "replay"}
	}
	if err := claimLetter(ctx, tx, claimPendingSQL, l, "replay"); err != nil {
		return ReplayResult{}, err
	}
	// What an editor showed was masked (mask.Policy); what it sends back may
	// still hold placeholders, which stand for the stored values.
	var err error
	if p.Args != nil {
		if p.Args, err = restoreMasked(p.Args, l.Args, "args"); err != nil {
			return ReplayResult{}, err
		}
	}
	if p.Kwargs != nil {
		if p.Kwargs, err = restoreMasked(p.Kwargs, l.Kwargs, "kwargs"); err != nil {
			return ReplayResult{}, err
		}
	}
	args, kwargs, edited := l.Args, l.Kwargs, false
	if p.Args != nil && !jsonEqual(p.Args, l.Args) {
		args, edited = p.Args, true
	}
	if p.Kwargs != nil && !jsonEqual(p.Kwargs, l.Kwargs) {
		kwargs, edited = p.Kwargs, true
	}
	id := l.ID
	enq, err := Enqueue(ctx, tx, EnqueueParams{
		Task: l.Task, Queue: l.Queue, Args: args, Kwargs: kwargs,
		MaxAttempts: l.MaxAttempts, RunAt: p.RunAt, ReplayOf: &id,
	})
	if err != nil {
		return ReplayResult{}, fmt.Errorf("replay dead letter %d: %w", l.ID, err)
	}
	if _, err := tx.ExecContext(ctx, insertReplayedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, enq.Job.ID); err != nil {
		return ReplayResult{}, fmt.Errorf("replay dead letter %d: %w", l.ID, translate(err))
	}
	action, details := ActionReplay, map[string]any{"replay_job_id": enq.Job.ID, "task": l.Task}
	if edited {
		action = ActionEditReplay
		details["before"] = map[string]json.RawMessage{"args": l.Args, "kwargs": l.Kwargs}
		details["after"] = map[string]json.RawMessage{"args": args, "kwargs": kwargs}
	}
	auditID, err := appendAudit(ctx, tx, AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: action, DeadLetterID: &id,
		Counts: mustJSON(map[string]int{"replayed": 1}), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: mustJSON(details),
	})
	if err != nil {
		return ReplayResult{}, err
	}
	return ReplayResult{JobID: enq.Job.ID, AuditID: auditID}, nil
}

// DiscardParams asks for one dead letter to be discarded (kept, hidden from
// pending, restorable).
type DiscardParams struct {
	ID     int64
	Actor  Actor
	Reason string
	Now    time.Time
	Key    string // one-time key, as in ReplayParams
}

// DiscardDeadLetter marks a pending letter discarded with a reason and
// audits it in one transaction.
func (s *Store) DiscardDeadLetter(ctx context.Context, p DiscardParams) (int64, error) {
	if p.Reason == "" {
		return 0, &ValidationError{Fields: map[string]string{"reason": "a reason is required to discard"}}
	}
	hash := requestHash(ActionDiscard, p.ID, p.Reason)
	return s.changeLetter(ctx, p.ID, p.Key, "discard", hash, func(tx *sqlx.Tx, l DeadLetter) (AuditEntry, error) {
		if l.Status != StatusPending {
			return AuditEntry{}, &StateError{Letter: l, Action: "discard"}
		}
		if err := claimLetter(ctx, tx, claimPendingSQL, l, "discard"); err != nil {
			return AuditEntry{}, err
		}
		if _, err := tx.ExecContext(ctx, insertDiscardedSQL, l.ID, l.FailedAt, l.Task, l.Queue, p.Actor.Name, p.Reason); err != nil {
			return AuditEntry{}, fmt.Errorf("discard dead letter %d: %w", l.ID, translate(err))
		}
		return AuditEntry{At: p.Now, Action: ActionDiscard, Reason: p.Reason,
			Counts: mustJSON(map[string]int{"discarded": 1}), Details: mustJSON(map[string]string{"task": l.Task})}, nil
	}, p.Actor)
}

// RestoreParams asks for a discarded letter to be pending again.
type RestoreParams struct {
	ID     int64
	Actor  Actor
	Reason string
	Now    time.Time
	Key    string // one-time key, as in ReplayParams
}

// claimDiscardedSQL is the guard of a restore: it deletes the letter's
// outcome if it is a discard, so of two restores only one goes on.
const claimDiscardedSQL = `
DELETE FROM dead_letter_outcomes WHERE dead_letter_id = $1 AND failed_at = $2 AND discarded_at IS NOT NULL`

// pendingAgainSQL makes a restored letter pending again.
const pendingAgainSQL = `
INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM dead_letter_records WHERE id = $1`

// RestoreDeadLetter undoes a discard and audits it in one transaction.
func (s *Store) RestoreDeadLetter(ctx context.Context, p RestoreParams) (int64, error) {
	hash := requestHash(ActionRestore, p.ID, p.Reason)
	return s.changeLetter(ctx, p.ID, p.Key, "restore", hash, func(tx *sqlx.Tx, l DeadLetter) (AuditEntry, error) {
		if l.Status != StatusDiscarded {
			return AuditEntry{}, &StateError{Letter: l, Action: "restore"}
		}
		if err := claimLetter(ctx, tx, claimDiscardedSQL, l, "restore", l.FailedAt); err != nil {
			return AuditEntry{}, err
		}
		if _, err := tx.ExecContext(ctx, pendingAgainSQL, l.ID); err != nil {
			return AuditEntry{}, fmt.Errorf("restore dead letter %d: %w", l.ID, translate(err))
		}
		return AuditEntry{At: p.Now, Action: ActionRestore, Reason: p.Reason,
			Counts:  mustJSON(map[string]int{"restored": 1}),
			Details: mustJSON(map[string]any{"task": l.Task, "was_discarded_by": l.DiscardedBy, "discard_reason": l.DiscardReason})}, nil
	}, p.Actor)
}

// changeLetter locks one letter, lets change apply its guarded update and
// describe it, then appends the audit entry — one transaction. hash is the
// request's digest, which key is bound to.
func (s *Store) changeLetter(ctx context.Context, id int64, key, action, hash string,
	change func(*sqlx.Tx, DeadLetter) (AuditEntry, error), actor Actor) (int64, error) {
	var out struct {
		AuditID int64 `json:"audit_event_id"`
	}
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		_, err := onceWithKey(ctx, tx, key, actor, action, hash, &out, func() error {
			var err error
			out.AuditID, err = changeLetterInTx(ctx, tx, id, change, actor)
			return err
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", action, err)
	}
	return out.AuditID, nil
}

func changeLetterInTx(ctx context.Context, tx *sqlx.Tx, id int64,
	change func(*sqlx.Tx, DeadLetter) (AuditEntry, error), actor Actor) (int64, error) {
	var l DeadLetter
	if err := tx.GetContext(ctx, &l, letterSQL, id); err != nil {
		return 0, fmt.Errorf("dead letter %d: %w", id, translate(err))
	}
	entry, err := change(tx, l)
	if err != nil {
		return 0, err
	}
	entry.Actor, entry.DeadLetterID = actor.Name, &id
	entry.RequestID, entry.RemoteAddr, entry.UserAgent = actor.RequestID, actor.RemoteAddr, actor.UserAgent
	return appendAudit(ctx, tx, entry)
}

// claimLetter runs a guard that must change exactly one row of letter l
// (its id the first argument). When it changes none, another action got
// there first: the *StateError names the letter as that action left it,
// read again now that it has committed.
func claimLetter(ctx context.Context, tx *sqlx.Tx, query string, l DeadLetter, action string, args ...any) error {
	r, err := tx.ExecContext(ctx, query, append([]any{l.ID}, args...)...)
	if err != nil {
		return fmt.Errorf("%s dead letter %d: %w", action, l.ID, translate(err))
	}
	if n, _ := r.RowsAffected(); n == 1 {
		return nil
	}
	var now DeadLetter
	if err := tx.GetContext(ctx, &now, letterSQL, l.ID); err != nil {
		return fmt.Errorf("dead letter %d: %w", l.ID, translate(err))
	}
	return &StateError{Letter: now, Action: action}
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only called with plain maps
	}
	return b
}
