package dlq

import (
	"encoding/json"
	"time"
)

// BatchResult says what one batch of a bulk operation did.
type BatchResult struct {
	Acted    int // letters replayed or discarded
	Skipped  int // letters in the batch that were no longer pending
	Finished bool
	State    OperationState
}

// ChangeOperationParams cancels an operation, releases a canary, resumes
// an auto-paused operation or stops following one.
type ChangeOperationParams struct {
	ID    int64
	Actor Actor
	Now   time.Time
	// Key, when set, makes the change happen once however often it is
	// sent: a retry answers the first result rather than a conflict.
	Key string
}

// JobOutcome is the state of one job an operation enqueued.
type JobOutcome struct {
	DeadLetterID int64   `db:"dead_letter_id" json:"dead_letter_id"`
	JobID        int64   `db:"job_id" json:"job_id"`
	State        State   `db:"state" json:"state"`
	Attempt      int     `db:"attempt" json:"attempt"`
	LastError    *string `db:"last_error" json:"last_error"`
	// Args and Kwargs of the job, to mask LastError; not shown.
	Args   json.RawMessage `db:"args" json:"-"`
	Kwargs json.RawMessage `db:"kwargs" json:"-"`
	// Source is the system the job runs in when it is not Redrive (River):
	// JobID is that system's.
	Source string `db:"source" json:"source,omitempty"`
}
