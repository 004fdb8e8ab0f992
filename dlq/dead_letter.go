package dlq

import (
	"encoding/json"
	"time"
)

// Reason says why a job was dead-lettered.
type Reason string

// The dead-letter reasons.
const (
	// ReasonExhausted: every attempt failed with a transient error.
	ReasonExhausted Reason = "exhausted"
	// ReasonPermanent: the handler said the same payload will fail the same way.
	ReasonPermanent Reason = "permanent"
	// ReasonLeaseExpired: the job's worker vanished on its last attempt (a
	// crash, an OOM kill), so the job is presumed to kill its worker.
	ReasonLeaseExpired Reason = "lease_expired"
	// ReasonKilled: an operator sent a waiting job to the dead letters.
	ReasonKilled Reason = "killed"
	// ReasonCancelled: an operator cancelled a running job's attempt.
	ReasonCancelled Reason = "cancelled"
)

// Reasons lists every reason in display order.
var Reasons = []Reason{ReasonExhausted, ReasonPermanent, ReasonLeaseExpired, ReasonKilled, ReasonCancelled}

// Valid reports whether r is a known reason.
func (r Reason) Valid() bool {
	for _, known := range Reasons {
		if r == known {
			return true
		}
	}
	return false
}

// Status is what has been done about a dead letter.
type Status string

// The dead-letter statuses.
const (
	StatusPending   Status = "pending"
	StatusReplayed  Status = "replayed"
	StatusDiscarded Status = "discarded"
)

// Statuses lists every status in display order.
var Statuses = []Status{StatusPending, StatusReplayed, StatusDiscarded}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, known := range Statuses {
		if s == known {
			return true
		}
	}
	return false
}

// DeadLetter is a job that will not run again by itself, with everything
// needed to diagnose it and to replay it.
type DeadLetter struct {
	ID             int64           `db:"id" json:"id"`
	JobID          int64           `db:"job_id" json:"job_id"`
	Queue          string          `db:"queue" json:"queue"`
	Task           string          `db:"task" json:"task"`
	Args           json.RawMessage `db:"args" json:"args"`
	Kwargs         json.RawMessage `db:"kwargs" json:"kwargs"`
	IdempotencyKey *string         `db:"idempotency_key" json:"idempotency_key"`
	ErrorClass     string          `db:"error_class" json:"error_class"`
	ErrorMessage   string          `db:"error_message" json:"error"`
	Traceback      string          `db:"traceback" json:"traceback,omitempty"`
	Attempts       int             `db:"attempts" json:"attempts"`
	MaxAttempts    int             `db:"max_attempts" json:"max_attempts"`
	History        Attempts        `db:"history" json:"history,omitempty"`
	Reason         Reason          `db:"reason" json:"reason"`
	Fingerprint    string          `db:"fingerprint" json:"fingerprint"`
	WorkerVersion  string          `db:"worker_version" json:"worker_version"`
	EnqueuedAt     time.Time       `db:"enqueued_at" json:"enqueued_at"`
	FailedAt       time.Time       `db:"failed_at" json:"failed_at"`
	ReplayOf       *int64          `db:"replay_of" json:"replay_of"`
	ReplayedAt     *time.Time      `db:"replayed_at" json:"replayed_at"`
	ReplayedBy     *string         `db:"replayed_by" json:"replayed_by"`
	ReplayJobID    *int64          `db:"replay_job_id" json:"replay_job_id"`
	DiscardedAt    *time.Time      `db:"discarded_at" json:"discarded_at"`
	DiscardedBy    *string         `db:"discarded_by" json:"discarded_by"`
	DiscardReason  *string         `db:"discard_reason" json:"discard_reason"`
	Status         Status          `db:"status" json:"status"`
	// Source is where the letter came from: RedriveSource (Redrive's own
	// queue) or a source the operator named.
	Source string `db:"source" json:"source"`
}
