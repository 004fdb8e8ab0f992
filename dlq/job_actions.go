package dlq

import (
	"encoding/json"
	"fmt"
	"time"
)

// Actions on live jobs (issue 14): run a waiting job now, kill it straight
// to the dead letters, or ask the worker running it to cancel the attempt.
// Each is guarded twice: the job is locked and compared with what the
// operator saw (its state and attempt, sent back from the page), and the
// UPDATE itself names the states it may change, so a job that a worker
// claimed, finished or dead-lettered meanwhile is reported, never changed.
// The audit entry is written in the same transaction.

// JobAction names an action on a live job.
type JobAction string

// The actions on live jobs.
const (
	JobRunNow JobAction = "run_now"
	JobKill   JobAction = "kill"
	JobCancel JobAction = "cancel"
)

// Valid reports whether a is a known action.
func (a JobAction) Valid() bool { return a == JobRunNow || a == JobKill || a == JobCancel }

// AuditAction is the audit trail's name for a.
func (a JobAction) AuditAction() string {
	switch a {
	case JobRunNow:
		return ActionJobRunNow
	case JobKill:
		return ActionJobKill
	default:
		return ActionJobCancel
	}
}

// Eligible lists the states a may act on.
func (a JobAction) Eligible() []State {
	if a == JobCancel {
		return []State{StateRunning}
	}
	return []State{StateAvailable, StateRetrying}
}

// CancelNotifyChannel is where a cancel request is announced to the worker
// holding the job; the payload is a CancelRequest as JSON.
const CancelNotifyChannel = "redrive_job_cancel"

// MaxBulkJobs bounds one bulk action on jobs: it runs in one transaction
// that locks every job it changes, so a larger selection must be narrowed.
const MaxBulkJobs = 10_000

// CancelRequest is an operator's request to cancel one attempt of a
// running job. It is stored in jobs.cancel_requested (for a worker that
// missed the NOTIFY, which reads it at its next heartbeat) and sent as the
// notification's payload.
type CancelRequest struct {
	JobID   int64     `json:"job_id"`
	Attempt int       `json:"attempt"`
	Worker  string    `json:"worker"`
	By      string    `json:"by"`
	Reason  string    `json:"reason"`
	Retry   bool      `json:"retry"`
	At      time.Time `json:"at"`
}

// JobActionParams asks for one action on one job.
type JobActionParams struct {
	Action JobAction
	ID     int64
	// SeenState and SeenAttempt are what the operator saw; when set, a job
	// that is no longer so is a *JobStateError and nothing changes.
	SeenState   State
	SeenAttempt *int
	Actor       Actor
	Reason      string
	// Retry, for a cancel: the attempt fails and the job retries (when it
	// has attempts left) instead of dead-lettering as cancelled.
	Retry bool
	Now   time.Time
	Key   string
}

// JobActionResult is what an action on one job did.
type JobActionResult struct {
	JobID int64 `json:"job_id"`
	// State is the job's state after the action (running for a cancel:
	// the worker decides when it stops).
	State        State  `json:"state"`
	DeadLetterID *int64 `json:"dead_letter_id,omitempty"`
	AuditID      int64  `json:"audit_event_id"`
	Repeated     bool   `json:"-"`
}

// JobStateError says a job is not in the state an action needs, or no
// longer in the state the operator saw. It matches ErrConflict.
type JobStateError struct {
	Job    Job
	Action JobAction
	// Changed: the job moved on since the operator's page showed it.
	Changed bool
	// NotDue: run now of a job that is already due.
	NotDue bool
}

func (e *JobStateError) Error() string {
	j := e.Job
	now := fmt.Sprintf("%s (attempt %d/%d)", j.State, j.Attempt, j.MaxAttempts)
	switch {
	case e.Changed && (j.State == StateSucceeded || j.State == StateDead):
		return fmt.Sprintf("the job changed: it finished meanwhile and is now %s; nothing was done", now)
	case e.Changed:
		return fmt.Sprintf("the job changed: it is now %s; nothing was done — reload the page and decide again", now)
	case e.NotDue:
		return fmt.Sprintf("job %d is already due and waits for a worker; there is nothing to run sooner", j.ID)
	case e.Action == JobCancel:
		return fmt.Sprintf("job %d is %s, not running; only a running job can be cancelled", j.ID, now)
	case e.Action == JobKill:
		return fmt.Sprintf("job %d is %s; only an available, scheduled or retrying job can be killed", j.ID, now)
	default:
		return fmt.Sprintf("job %d is %s; only a retrying or scheduled job can be run now", j.ID, now)
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *JobStateError) Is(target error) bool { return target == ErrConflict }

// As finds a JobStateError as an Error coded EConflict.
func (e *JobStateError) As(target any) bool {
	return setError(target, &Error{Code: EConflict, Message: e.Error()})
}

// KilledClass is the error class of a letter killed before it ever failed.
const KilledClass = "Killed"

// ParseCancelRequest reads a cancel notification's payload.
func ParseCancelRequest(payload string) (CancelRequest, error) {
	var r CancelRequest
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return CancelRequest{}, fmt.Errorf("cancel request: %w", err)
	}
	return r, nil
}
