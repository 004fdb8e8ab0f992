package remote

import (
	"encoding/json"
	"time"
)

// The API's answers as the CLI reads them. They are the client's own
// types, not the server's: the contract is the OpenAPI document, and a
// field the server adds later is ignored rather than breaking old CLIs.

// Letter is a dead letter as the list shows it.
type Letter struct {
	ID          int64           `json:"id"`
	JobID       int64           `json:"job_id"`
	Task        string          `json:"task"`
	Queue       string          `json:"queue"`
	Args        json.RawMessage `json:"args"`
	Kwargs      json.RawMessage `json:"kwargs"`
	ErrorClass  string          `json:"error_class"`
	Error       string          `json:"error"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Reason      string          `json:"reason"`
	Status      string          `json:"status"`
	Fingerprint string          `json:"fingerprint"`
	EnqueuedAt  time.Time       `json:"enqueued_at"`
	FailedAt    time.Time       `json:"failed_at"`
	ReplayOf    *int64          `json:"replay_of"`
	ReplayedAt  *time.Time      `json:"replayed_at"`
	ReplayJobID *int64          `json:"replay_job_id"`
	DiscardedAt *time.Time      `json:"discarded_at"`
	// Source is where the letter came from: redrive, or a source the
	// console's operator named.
	Source string `json:"source"`
}

// LetterPage is one page of the list and the cursor of the next.
type LetterPage struct {
	Items      []Letter `json:"items"`
	NextCursor *string  `json:"next_cursor"`
}

// Attempt is one failed attempt in a letter's history.
type Attempt struct {
	Attempt    int       `json:"attempt"`
	At         time.Time `json:"at"`
	Host       string    `json:"host"`
	Version    string    `json:"version"`
	Class      string    `json:"class"`
	Message    string    `json:"message"`
	Outcome    string    `json:"outcome"`
	DurationMS int64     `json:"duration_ms"`
	// Logs are what the task logged during the attempt (masked), "" when
	// nothing.
	Logs string `json:"logs,omitempty"`
}

// LetterDetail is one letter with its traceback and history.
type LetterDetail struct {
	Letter
	Traceback          string    `json:"traceback"`
	TracebackTruncated bool      `json:"traceback_truncated"`
	WorkerVersion      string    `json:"worker_version"`
	History            []Attempt `json:"history"`
	LaterLetters       []int64   `json:"later_letters"`
}

// Group is an error group: one fingerprint, one bug.
type Group struct {
	Fingerprint   string    `json:"fingerprint"`
	Task          string    `json:"task"`
	ErrorClass    string    `json:"error_class"`
	SampleMessage string    `json:"sample_message"`
	Total         int64     `json:"total"`
	Pending       int64     `json:"pending"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
	Inflow        []int64   `json:"inflow"`
}

// BulkFilter is the list's filters, for a bulk action.
type BulkFilter struct {
	Task        string `json:"task,omitempty"`
	Queue       string `json:"queue,omitempty"`
	Reason      string `json:"reason,omitempty"`
	ErrorClass  string `json:"error_class,omitempty"`
	Q           string `json:"q,omitempty"`
	Since       string `json:"since,omitempty"`
	Until       string `json:"until,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Source      string `json:"source,omitempty"`
}

// BulkRequest starts a bulk replay or discard.
type BulkRequest struct {
	IDs           []int64     `json:"ids,omitempty"`
	Filter        *BulkFilter `json:"filter,omitempty"`
	DryRun        bool        `json:"dry_run,omitempty"`
	RatePerSecond float64     `json:"rate_per_second,omitempty"`
	Canary        int         `json:"canary,omitempty"`
	Reason        string      `json:"reason,omitempty"`
	WaitSeconds   *float64    `json:"wait_seconds,omitempty"`
	// Queue, StartAt and MaxAttempts send a replay's jobs to another
	// queue, from a time, with a new maximum of attempts.
	Queue       string     `json:"queue,omitempty"`
	StartAt     *time.Time `json:"start_at,omitempty"`
	MaxAttempts int        `json:"max_attempts,omitempty"`
}

// JobOutcome is where one of a canary's jobs is.
type JobOutcome struct {
	DeadLetterID int64   `json:"dead_letter_id"`
	JobID        int64   `json:"job_id"`
	State        string  `json:"state"`
	Attempt      int     `json:"attempt"`
	LastError    *string `json:"last_error"`
}

// Operation is a bulk replay or discard.
type Operation struct {
	OperationID   *int64       `json:"operation_id"`
	URL           string       `json:"url"`
	Kind          string       `json:"kind"`
	State         string       `json:"state"`
	DryRun        bool         `json:"dry_run"`
	Matched       int64        `json:"matched"`
	Replayed      *int64       `json:"replayed"`
	Discarded     *int64       `json:"discarded"`
	Skipped       int64        `json:"skipped"`
	MaxID         int64        `json:"max_id"`
	Actor         string       `json:"actor"`
	Reason        string       `json:"reason"`
	RatePerSecond *float64     `json:"rate_per_second"`
	Canary        int          `json:"canary"`
	CanaryJobs    []JobOutcome `json:"canary_jobs"`
	Queue         *string      `json:"queue"`
	StartAt       *time.Time   `json:"start_at"`
	MaxAttempts   *int         `json:"max_attempts"`
	// Replays is where a replay's jobs are: the second phase. The
	// operation is done once none wait or run.
	Replays            *ReplayCounts `json:"replays"`
	DiedAgainPercent   *float64      `json:"died_again_percent"`
	StoppedFollowingBy *string       `json:"stopped_following_by"`
	AuditEventID       *int64        `json:"audit_event_id"`
	Error              *string       `json:"error"`
	CreatedAt          *time.Time    `json:"created_at"`
	FinishedAt         *time.Time    `json:"finished_at"`
}

// ID is the operation's id, 0 for a dry run.
func (op Operation) ID() int64 {
	if op.OperationID == nil {
		return 0
	}
	return *op.OperationID
}

// Acted is how many letters the operation has replayed or discarded.
func (op Operation) Acted() int64 {
	switch {
	case op.Replayed != nil:
		return *op.Replayed
	case op.Discarded != nil:
		return *op.Discarded
	}
	return 0
}

// Finished reports whether the operation will do nothing more: as the
// console's (dlq.OperationState.Finished), every replay settled or no
// longer followed; a settling operation is not finished.
func (op Operation) Finished() bool {
	return op.State == "done" || op.State == "cancelled" || op.State == "failed"
}

// ReplayCounts is where an operation's replay jobs are.
type ReplayCounts struct {
	Waiting   int64 `json:"waiting"`
	Running   int64 `json:"running"`
	Succeeded int64 `json:"succeeded"`
	DiedAgain int64 `json:"died_again"`
}

// Settled counts the replays that succeeded or died again.
func (c ReplayCounts) Settled() int64 { return c.Succeeded + c.DiedAgain }

// Source is where letters come from, and its state.
type Source struct {
	Name         string     `json:"name"`
	Kind         string     `json:"kind"`
	Imported     int64      `json:"imported"`
	LastImportAt *time.Time `json:"last_import_at"`
	Letters      int64      `json:"letters"`
	Pending      int64      `json:"pending"`
	CheckedAt    *time.Time `json:"checked_at"`
	LastError    *string    `json:"last_error"`
	CanReplay    bool       `json:"can_replay"`
	NoReplay     string     `json:"no_replay"`
}
