package dlq

import (
	"fmt"
	"time"
)

// StartAtSlack is how far in the past a replay's start time may be and
// still mean "now": a form filled in a minute ago, or a clock a little
// behind. Earlier than that is a mistake (a time zone misread), refused.
const StartAtSlack = 5 * time.Minute

// ReplayTarget is where, from when and how a replay runs when not as its
// letter's job ran: another queue (a sandbox or debug queue where a fix is
// tried before the real traffic), a time to start (after a deploy lands),
// and a new maximum number of attempts. Its zero value replays the letter
// in its own queue, now, with its own attempts.
//
// The queue and the attempts apply to Redrive's own jobs; a letter of
// another system (River, a Celery app, an HTTP source) runs again in that
// system, which keeps its own queue and attempts, so a replay of one asks
// only for a start time.
type ReplayTarget struct {
	Queue       string    `json:"queue,omitempty"`
	StartAt     time.Time `json:"start_at,omitzero"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
}

// IsZero reports whether t asks for nothing but a plain replay.
func (t ReplayTarget) IsZero() bool { return t == ReplayTarget{} }

// OnlyStart reports whether t asks for no more than a start time, which
// every source can honour.
func (t ReplayTarget) OnlyStart() bool { return t.Queue == "" && t.MaxAttempts == 0 }

// Problems adds what is wrong with t to problems, keyed by form field
// (queue, start_at, max_attempts); now is the time the replay is asked.
func (t ReplayTarget) Problems(now time.Time, problems map[string]string) {
	if t.Queue != "" {
		if p := QueueNameProblem(t.Queue); p != "" {
			problems["queue"] = p
		}
	}
	if t.MaxAttempts != 0 && (t.MaxAttempts < 1 || t.MaxAttempts > MaxMaxAttempts) {
		problems["max_attempts"] = fmt.Sprintf("must be between 1 and %d", MaxMaxAttempts)
	}
	switch {
	case t.StartAt.IsZero():
	case t.StartAt.Before(now.Add(-StartAtSlack)):
		problems["start_at"] = fmt.Sprintf("%s is in the past (it is %s now, UTC): leave it empty to start now",
			t.StartAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case t.StartAt.After(now.Add(MaxRunAhead)):
		problems["start_at"] = fmt.Sprintf("must be at most %d days ahead", MaxRunAhead/(24*time.Hour))
	}
}

// Validate is Problems as an error: nil, or a *ValidationError.
func (t ReplayTarget) Validate(now time.Time) error {
	problems := map[string]string{}
	t.Problems(now, problems)
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// Details is what the audit entry of a replay records of t: only what it
// asks for.
func (t ReplayTarget) Details(details map[string]any) {
	if t.Queue != "" {
		details["queue"] = t.Queue
	}
	if !t.StartAt.IsZero() {
		details["start_at"] = t.StartAt.UTC().Format(time.RFC3339)
	}
	if t.MaxAttempts != 0 {
		details["max_attempts"] = t.MaxAttempts
	}
}

// Describe is t in a few words for a confirmation or a page: "in queue
// sandbox, from 2026-12-07 18:00 UTC, with at most 1 attempt"; "" for the
// zero target.
func (t ReplayTarget) Describe() string {
	var s string
	add := func(part string) {
		if s != "" {
			s += ", "
		}
		s += part
	}
	if t.Queue != "" {
		add("in queue " + t.Queue)
	}
	if !t.StartAt.IsZero() {
		add("from " + t.StartAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	switch {
	case t.MaxAttempts == 1:
		add("with at most 1 attempt")
	case t.MaxAttempts > 1:
		add(fmt.Sprintf("with at most %d attempts", t.MaxAttempts))
	}
	return s
}

// Target is the replay target op was started with.
func (op Operation) Target() ReplayTarget {
	var t ReplayTarget
	if op.TargetQueue != nil {
		t.Queue = *op.TargetQueue
	}
	if op.StartAt != nil {
		t.StartAt = *op.StartAt
	}
	if op.TargetMaxAttempts != nil {
		t.MaxAttempts = *op.TargetMaxAttempts
	}
	return t
}
