package dlq

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Throttles slow a queue or a task down during an incident instead of
// stopping it: at most MaxRunning of its jobs run at once across all
// workers, and at most MaxPerSecond start a second. The claim honours an
// open throttle from its commit on (it reads the throttles table itself);
// jobs beyond the limits wait as they are, attempts untouched. A throttle
// is set, changed and lifted by an operator with a reason, and ends by
// itself at its until, like a pause: whoever notices first
// (ExpireThrottles: the console's banner, a worker's rescue pass) records
// the expiry and its audit entry.

// Audit actions of throttles.
const (
	ActionThrottle        = "throttle"
	ActionThrottleChange  = "throttle_change"
	ActionThrottleLift    = "throttle_lift"
	ActionThrottleExpired = "throttle_expired"
)

// Bounds of a throttle's limits, as the table's CHECKs have them.
const (
	MaxThrottleRunning   = 100_000
	MinThrottlePerSecond = 0.01
	MaxThrottlePerSecond = 100_000
)

// Claim is what one claim took, and whether a throttle was open when it
// ran: a claim that came back short may then have left throttled work
// waiting for room (a slot or a token), worth asking for again soon.
type Claim struct {
	Jobs      []Job
	Throttled bool
	// Exhausted names, while a throttle is open, each queue whose walk
	// read every job due when the claim ran, with that time (the
	// database's now()): what it left was held (a paused task, a
	// throttled one with no room), and a later claim may walk on from
	// there instead of reading past the held jobs again.
	Exhausted map[string]time.Time
	// Ungranted says a throttle touching the claimed queues was open that
	// the claim had no grant of at its current revision (none yet, or one
	// made before an operator changed it): the claim took none of its
	// jobs, and the worker should renew its grants before claiming again.
	Ungranted bool
}

// ThrottleGrant is one worker process's share of an open throttle, leased
// until ExpiresAt by the database's clock (Now is that clock when the
// grant was written): at most Slots of the throttle's jobs running in
// that process (nil: the throttle caps no running jobs), and PerSecond
// starts a second (nil: it caps no rate). The worker keeps within it on
// its own, so its claims lock and count nothing.
type ThrottleGrant struct {
	ThrottleID int64     `db:"throttle_id"`
	Kind       string    `db:"kind"`
	Name       string    `db:"name"`
	Revision   int64     `db:"revision"`
	Slots      *int      `db:"slots"`
	PerSecond  *float64  `db:"per_second"`
	ExpiresAt  time.Time `db:"expires_at"`
	Now        time.Time `db:"now"`
}

// Throttle is one throttle of a queue or a task, open or ended.
type Throttle struct {
	ID   int64  `db:"id" json:"id"`
	Kind string `db:"kind" json:"kind"`
	Name string `db:"name" json:"name"`
	// MaxRunning caps the jobs running at once across all workers; nil:
	// no cap. MaxPerSecond caps the starts a second; nil: no cap.
	MaxRunning   *int       `db:"max_running" json:"max_running"`
	MaxPerSecond *float64   `db:"max_per_second" json:"max_per_second"`
	Reason       string     `db:"reason" json:"reason"`
	SetBy        string     `db:"set_by" json:"set_by"`
	SetAt        time.Time  `db:"set_at" json:"set_at"`
	Until        *time.Time `db:"until" json:"until"`
	ChangedBy    *string    `db:"changed_by" json:"changed_by"`
	ChangedAt    *time.Time `db:"changed_at" json:"changed_at"`
	LiftedAt     *time.Time `db:"lifted_at" json:"lifted_at"`
	LiftedBy     *string    `db:"lifted_by" json:"lifted_by"`
	Expired      bool       `db:"expired" json:"expired"`
}

// Target names what the throttle slows: "task payments.charge".
func (t Throttle) Target() string { return t.Kind + " " + t.Name }

// Limits says the throttle's limits in words: "at most 5 running, 2 starts a second".
func (t Throttle) Limits() string {
	return ThrottleLimits(t.MaxRunning, t.MaxPerSecond)
}

// ThrottleLimits says limits in words.
func ThrottleLimits(maxRunning *int, maxPerSecond *float64) string {
	var parts []string
	if maxRunning != nil {
		parts = append(parts, fmt.Sprintf("%d running at once", *maxRunning))
	}
	if maxPerSecond != nil {
		parts = append(parts, strconv.FormatFloat(*maxPerSecond, 'f', -1, 64)+" starts a second")
	}
	return "at most " + strings.Join(parts, " and ")
}

// ThrottleConflictError says the queue or task is already throttled, or
// the throttle to change or lift has already ended. It matches ErrConflict.
type ThrottleConflictError struct {
	Throttle Throttle
	// Ended: the throttle asked for had already ended.
	Ended bool
}

func (e *ThrottleConflictError) Error() string {
	t := e.Throttle
	if !e.Ended {
		return fmt.Sprintf("%s is already throttled (throttle %d, %s, by %s since %s UTC: %q); change or lift that one",
			t.Target(), t.ID, t.Limits(), t.SetBy, t.SetAt.UTC().Format("2006-01-02 15:04"), t.Reason)
	}
	switch {
	case t.Expired && t.Until != nil:
		return fmt.Sprintf("throttle %d of %s already ended: it expired at %s UTC", t.ID, t.Target(), t.Until.UTC().Format("2006-01-02 15:04"))
	case t.LiftedAt != nil && t.LiftedBy != nil:
		return fmt.Sprintf("throttle %d of %s already ended: %s lifted it at %s UTC", t.ID, t.Target(), *t.LiftedBy,
			t.LiftedAt.UTC().Format("2006-01-02 15:04"))
	default:
		return fmt.Sprintf("throttle %d of %s already ended", t.ID, t.Target())
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ThrottleConflictError) Is(target error) bool { return target == ErrConflict }

// As finds a ThrottleConflictError as an Error coded EConflict.
func (e *ThrottleConflictError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

// ThrottleParams asks for a queue or a task to be throttled, or (with ID
// set) for an open throttle's limits, reason and expiry to change.
type ThrottleParams struct {
	// ID names the throttle to change; zero sets a new one on Kind and Name.
	ID           int64
	Kind         string
	Name         string
	MaxRunning   *int
	MaxPerSecond *float64
	Reason       string
	// Until, when set, ends the throttle by itself; UntilField names the
	// request's field it was read from ("for" or "until").
	Until      *time.Time
	UntilField string
	Actor      Actor
	// Now is the time recorded in the audit entry, and what Until must lie
	// after.
	Now time.Time
	// Key, when set, makes the request happen once however often it is sent;
	// Expiry is the expiry as the request wrote it, compared instead of
	// Until (see PauseParams.Expiry).
	Key    string
	Expiry string
}

// Valid lists what is wrong with p, field by field.
func (p ThrottleParams) Valid() map[string]string {
	problems := map[string]string{}
	if p.ID == 0 {
		// The target is the pause's: the same names, the same words.
		for k, v := range (PauseParams{Kind: p.Kind, Name: p.Name, Reason: "-"}).Valid() {
			if k == "kind" {
				v = `name either a queue ("queue") or a task ("task") to throttle`
			}
			problems[k] = v
		}
	}
	switch {
	case p.MaxRunning == nil && p.MaxPerSecond == nil:
		problems["max_running"] = "give a limit: how many may run at once (max_running), how many may start a second (max_per_second), or both"
	case p.MaxRunning != nil && (*p.MaxRunning < 1 || *p.MaxRunning > MaxThrottleRunning):
		problems["max_running"] = fmt.Sprintf("a whole number from 1 to %d (to stop it altogether, pause it)", MaxThrottleRunning)
	}
	if r := p.MaxPerSecond; r != nil && (math.IsNaN(*r) || *r < MinThrottlePerSecond || *r > MaxThrottlePerSecond) {
		problems["max_per_second"] = fmt.Sprintf("a number from %g to %d (0.5 is one start every 2 seconds)", MinThrottlePerSecond, MaxThrottlePerSecond)
	}
	for k, v := range (PauseParams{Kind: PauseTask, Name: "x", Reason: p.Reason, Until: p.Until, UntilField: p.UntilField, Now: p.Now}).Valid() {
		problems[k] = strings.NewReplacer("pause", "throttle", "resumed", "lifted").Replace(v)
	}
	return problems
}

// ThrottleResult is what setting, changing or lifting a throttle did.
type ThrottleResult struct {
	Throttle Throttle `json:"throttle"`
	AuditID  int64    `json:"audit_event_id"`
	// Repeated: the key had been used; this is the first answer.
	Repeated bool `json:"-"`
}

// LiftParams asks for an open throttle to end.
type LiftParams struct {
	ID     int64
	Reason string // optional
	Actor  Actor
	Now    time.Time
	Key    string
}

// ActiveThrottle is an open throttle with how its work stands now.
type ActiveThrottle struct {
	Throttle
	// Running counts its jobs running now; Waiting its jobs due now and
	// not running.
	Running int64 `db:"running" json:"running"`
	Waiting int64 `db:"waiting" json:"waiting"`
}
