package dlq

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Pauses hold a queue or a task during an incident. The claim skips what
// an open pause holds (claimSQL reads the pauses table itself, so a pause
// takes effect with its commit and a worker that starts later honours it);
// the held jobs keep their state, run_at and attempts, and are claimed in
// their old order once the pause ends. A pause ends when it is resumed or
// when its until passes: the claim compares until with now(), so expiry
// needs nobody to act; whoever notices first (ExpirePauses: the console's
// banner, a worker's heartbeat) records it and writes its audit entry.

// Pause kinds.
const (
	PauseQueue = "queue"
	PauseTask  = "task"
)

// Audit actions of pauses.
const (
	ActionPause        = "pause"
	ActionResume       = "resume"
	ActionPauseExpired = "pause_expired"
)

// ExpiryActor is the actor of the audit entry an expiry writes, and the
// resumed_by of an expired pause.
const ExpiryActor = "expiry"

// MaxPauseReason bounds a pause's reason; MinPauseLength and
// MaxPauseLength how near and how far ahead until may lie. The minimum
// keeps an until a moment ahead by this process's clock from being behind
// the database's, whose CHECK would refuse it in words nobody asked for.
const (
	MaxPauseReason = 1000
	MinPauseLength = time.Second
	MaxPauseLength = 30 * 24 * time.Hour
)

// Pause is one pause of a queue or a task, open or ended.
type Pause struct {
	ID        int64      `db:"id" json:"id"`
	Kind      string     `db:"kind" json:"kind"`
	Name      string     `db:"name" json:"name"`
	Reason    string     `db:"reason" json:"reason"`
	PausedBy  string     `db:"paused_by" json:"paused_by"`
	PausedAt  time.Time  `db:"paused_at" json:"paused_at"`
	Until     *time.Time `db:"until" json:"until"`
	ResumedAt *time.Time `db:"resumed_at" json:"resumed_at"`
	ResumedBy *string    `db:"resumed_by" json:"resumed_by"`
	Expired   bool       `db:"expired" json:"expired"`
}

// Target names what the pause holds: "task payments.charge".
func (p Pause) Target() string { return p.Kind + " " + p.Name }

// Open reports whether the pause still holds at now.
func (p Pause) Open(now time.Time) bool {
	return p.ResumedAt == nil && (p.Until == nil || p.Until.After(now))
}

// PauseConflictError says the queue or task is already paused, or the
// pause to resume has already ended. It matches ErrConflict.
type PauseConflictError struct {
	Pause Pause
	// Ended: the pause asked to resume had already ended.
	Ended bool
}

func (e *PauseConflictError) Error() string {
	p := e.Pause
	if !e.Ended {
		return fmt.Sprintf("%s is already paused (pause %d, by %s since %s UTC: %q); resume it first to pause it anew",
			p.Target(), p.ID, p.PausedBy, p.PausedAt.UTC().Format("2006-01-02 15:04"), p.Reason)
	}
	switch {
	case p.Expired && p.Until != nil:
		return fmt.Sprintf("pause %d of %s already ended: it expired at %s UTC", p.ID, p.Target(), p.Until.UTC().Format("2006-01-02 15:04"))
	case p.ResumedAt != nil && p.ResumedBy != nil:
		return fmt.Sprintf("pause %d of %s already ended: %s resumed it at %s UTC", p.ID, p.Target(), *p.ResumedBy,
			p.ResumedAt.UTC().Format("2006-01-02 15:04"))
	default:
		return fmt.Sprintf("pause %d of %s already ended", p.ID, p.Target())
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *PauseConflictError) Is(target error) bool { return target == ErrConflict }

// As finds a PauseConflictError as an Error coded EConflict.
func (e *PauseConflictError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

// PauseParams asks for a queue or a task to be paused.
type PauseParams struct {
	Kind   string
	Name   string
	Reason string
	// Until, when set, ends the pause by itself.
	Until *time.Time
	// UntilField names the request's field Until was read from: "for" (a
	// duration) or "until" (a time; the default). A problem with Until is
	// reported under it, so the person is told about what they wrote.
	UntilField string
	Actor      Actor
	// Now is the time recorded in the audit entry, and what Until must lie
	// after.
	Now time.Time
	// Key, when set, makes the pause happen once however often it is sent.
	Key string
	// Expiry, when set, is the expiry as the request wrote it ("30m",
	// "14:30"). The key's request is then compared by it rather than by
	// Until: a duration or a time of day names a later instant on every
	// retry, which would make each retry look like another request.
	Expiry string
}

// Valid lists what is wrong with p, field by field.
func (p PauseParams) Valid() map[string]string {
	problems := map[string]string{}
	switch p.Kind {
	case PauseQueue:
		if QueueNameProblem(p.Name) != "" {
			problems["queue"] = fmt.Sprintf("a queue name: 1-%d letters, digits or . _ : -", MaxQueueNameLen)
		}
	case PauseTask:
		if TaskNameProblem(p.Name) != "" {
			problems["task"] = fmt.Sprintf("a task name: 1-%d letters, digits or . _ : -", MaxTaskNameLen)
		}
	default:
		problems["kind"] = `name either a queue ("queue") or a task ("task") to pause`
	}
	switch reason := strings.TrimSpace(p.Reason); {
	case reason == "":
		problems["reason"] = "a reason is required: say why, for whoever finds the pause"
	case utf8.RuneCountInString(reason) > MaxPauseReason:
		problems["reason"] = fmt.Sprintf("at most %d characters", MaxPauseReason)
	case strings.ContainsRune(reason, 0) || !utf8.ValidString(reason):
		problems["reason"] = "must be text (no NUL bytes, valid UTF-8)"
	}
	if p.Until != nil {
		field := "until"
		if p.UntilField == "for" {
			field = "for"
		}
		switch {
		case !p.Until.After(p.Now):
			problems[field] = fmt.Sprintf("must be in the future (it is %s UTC now)", p.Now.UTC().Format("2006-01-02 15:04"))
		case p.Until.Sub(p.Now) < MinPauseLength:
			problems[field] = "at least a second ahead: a shorter pause would end before it began"
		case p.Until.Sub(p.Now) > MaxPauseLength:
			problems[field] = "at most 30 days ahead (720h): a pause that long is better resumed by hand"
		}
	}
	return problems
}

// PauseResult is what a pause did.
type PauseResult struct {
	Pause   Pause `json:"pause"`
	AuditID int64 `json:"audit_event_id"`
	// Repeated: the key had been used; this is the first answer.
	Repeated bool `json:"-"`
}

// ResumeParams asks for an open pause to end.
type ResumeParams struct {
	ID     int64
	Reason string // optional
	Actor  Actor
	Now    time.Time
	Key    string
}

// ActivePause is an open pause with the jobs waiting behind it.
type ActivePause struct {
	Pause
	// Waiting counts the held jobs that are due now; Scheduled those due
	// later (retries and scheduled jobs).
	Waiting   int64 `db:"waiting" json:"waiting"`
	Scheduled int64 `db:"scheduled" json:"scheduled"`
}

// QueueWait is how long the oldest due job of a queue has been waiting.
type QueueWait struct {
	Queue  string    `db:"queue"`
	Oldest time.Time `db:"oldest"`
}
