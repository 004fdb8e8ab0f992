package dlq

import (
	"encoding/json"
	"time"
)

// ActionTestRun is the audit action of a test run: one job run from a
// letter's arguments to try a fix before replaying, which leaves the
// letter pending.
const ActionTestRun = "test_run"

// TestRunMaxAttempts is a test job's maximum of attempts unless the
// operator asks for more: one try says whether the fix works, and a test
// that retries for an hour says nothing sooner.
const TestRunMaxAttempts = 1

// TestRunParams asks for one test job from the letter LetterID: its task
// with its arguments (or Args and Kwargs when not nil, as edited), on
// Target's queue (the letter's own when empty), from Target's start, with
// Target's maximum of attempts (TestRunMaxAttempts when zero).
type TestRunParams struct {
	LetterID int64
	Actor    Actor
	Args     json.RawMessage
	Kwargs   json.RawMessage
	Target   ReplayTarget
	Reason   string
	Now      time.Time
	// Key is the form's one-time key: a double click runs one test job.
	Key string
}

// TestRunResult is the test job a test run enqueued, and its audit entry.
type TestRunResult struct {
	JobID    int64 `json:"job_id"`
	AuditID  int64 `json:"audit_event_id"`
	Repeated bool  `json:"repeated,omitempty"`
}

// TestRun is one test job of a letter as it is now. State is the job's
// ("" once the cleaner has removed a job that succeeded long ago);
// DeadLetterID is the letter it was tried for, and DiedAsLetter the letter
// its job became when it died, settled at once as a test's (00119).
type TestRun struct {
	JobID        int64      `db:"job_id" json:"job_id"`
	DeadLetterID int64      `db:"dead_letter_id" json:"dead_letter_id"`
	RequestedBy  string     `db:"requested_by" json:"requested_by"`
	RequestedAt  time.Time  `db:"requested_at" json:"requested_at"`
	Queue        string     `db:"queue" json:"queue"`
	State        State      `db:"state" json:"state"`
	Attempt      int        `db:"attempt" json:"attempt"`
	MaxAttempts  int        `db:"max_attempts" json:"max_attempts"`
	LastError    *string    `db:"last_error" json:"last_error"`
	FinishedAt   *time.Time `db:"finished_at" json:"finished_at"`
	DiedAsLetter *int64     `db:"died_as_letter" json:"died_as_letter,omitempty"`
	// Args and Kwargs of the job, to mask LastError; not shown.
	Args   json.RawMessage `db:"args" json:"-"`
	Kwargs json.RawMessage `db:"kwargs" json:"-"`
}

// Settled reports whether the test job has finished: succeeded, dead, or
// gone (cleaned away after it succeeded).
func (t TestRun) Settled() bool {
	return t.State == StateSucceeded || t.State == StateDead || t.State == ""
}
