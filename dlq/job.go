package dlq

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// State is where a job is in its life (see the package doc).
type State string

// The job states.
const (
	StateAvailable State = "available"
	StateRetrying  State = "retrying"
	StateRunning   State = "running"
	StateSucceeded State = "succeeded"
	StateDead      State = "dead"
)

// States lists every job state in display order.
var States = []State{StateAvailable, StateRetrying, StateRunning, StateSucceeded, StateDead}

// Valid reports whether s is one of the known states.
func (s State) Valid() bool {
	for _, known := range States {
		if s == known {
			return true
		}
	}
	return false
}

// Job is one unit of work in the jobs table.
type Job struct {
	ID             int64           `db:"id" json:"id"`
	Queue          string          `db:"queue" json:"queue"`
	Task           string          `db:"task" json:"task"`
	Args           json.RawMessage `db:"args" json:"args"`
	Kwargs         json.RawMessage `db:"kwargs" json:"kwargs"`
	IdempotencyKey *string         `db:"idempotency_key" json:"idempotency_key"`
	State          State           `db:"state" json:"state"`
	Attempt        int             `db:"attempt" json:"attempt"`
	MaxAttempts    int             `db:"max_attempts" json:"max_attempts"`
	RunAt          time.Time       `db:"run_at" json:"run_at"`
	LeaseOwner     *string         `db:"lease_owner" json:"lease_owner"`
	LeaseExpiresAt *time.Time      `db:"lease_expires_at" json:"lease_expires_at"`
	LastError      *string         `db:"last_error" json:"last_error"`
	Errors         Attempts        `db:"errors" json:"errors"`
	CreatedAt      time.Time       `db:"created_at" json:"created_at"`
	AttemptedAt    *time.Time      `db:"attempted_at" json:"attempted_at"`
	FinishedAt     *time.Time      `db:"finished_at" json:"finished_at"`
	ReplayOf       *int64          `db:"replay_of" json:"replay_of"`
	// TimeoutMS is this job's own limit on one attempt, set at enqueue;
	// nil: the task's, or the worker's default.
	TimeoutMS *int64 `db:"timeout_ms" json:"timeout_ms,omitempty"`
}

// Timeout is the job's own limit on one attempt; 0 when it has none.
func (j Job) Timeout() time.Duration {
	if j.TimeoutMS == nil {
		return 0
	}
	return time.Duration(*j.TimeoutMS) * time.Millisecond
}

// Outcome says what became of a job after one attempt.
type Outcome string

// The outcomes recorded in attempt history.
const (
	OutcomeRetry        Outcome = "retry"         // transient failure, another attempt is scheduled
	OutcomeDead         Outcome = "dead"          // the job was dead-lettered after this attempt
	OutcomeLeaseExpired Outcome = "lease_expired" // the worker vanished; rescued by another worker
	OutcomeInterrupted  Outcome = "interrupted"   // handed back at shutdown; does not count
	OutcomeKilled       Outcome = "killed"        // an operator sent the waiting job to the dead letters
	OutcomeCancelled    Outcome = "cancelled"     // an operator cancelled the running attempt
	// OutcomeLost: the handler ran, but the job was taken again (rescued
	// after its lease ran out) before the worker could record the outcome.
	// The attempt counts.
	OutcomeLost Outcome = "outcome_lost"
)

// OutcomeLostClass is the class of an OutcomeLost entry.
const OutcomeLostClass = "OutcomeLost"

// Attempt is one entry of a job's error history: what happened on one try.
type Attempt struct {
	Attempt   int       `json:"attempt"`
	At        time.Time `json:"at"`
	Worker    string    `json:"worker,omitempty"`
	Host      string    `json:"host,omitempty"`
	Version   string    `json:"version,omitempty"`
	Class     string    `json:"class"`
	Message   string    `json:"message"`
	Traceback string    `json:"traceback,omitempty"`
	Outcome   Outcome   `json:"outcome"`
	// RetryInMS is the delay chosen before the next attempt, when there is one.
	RetryInMS  int64 `json:"retry_in_ms,omitempty"`
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Logs are the lines the task logged during the attempt through
	// worker.Logger, as logfmt, at most 64 KiB, a cut said in a last line
	// ("… 12 more lines, 3.1 KiB, cut"). Only failed attempts keep them.
	Logs string `json:"logs,omitempty"`
}

// Attempts is a job's history, stored as a jsonb array.
type Attempts []Attempt

// Scan implements sql.Scanner for jsonb.
func (a *Attempts) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		*a = nil
		return nil
	case []byte:
		b = v
	case string:
		b = []byte(v)
	default:
		return fmt.Errorf("scan attempts: unexpected type %T", src)
	}
	if string(b) == "[]" {
		// Every claim of a first attempt reads this: as json.Unmarshal
		// would, but without its scanner (3 % of the worker's CPU in a
		// drain of no-op jobs).
		*a = Attempts{}
		return nil
	}
	if h, ok := decodeAttempts(b); ok {
		*a = h
		return nil
	}
	return json.Unmarshal(b, (*[]Attempt)(a))
}

// Value implements driver.Valuer for jsonb.
func (a Attempts) Value() (driver.Value, error) {
	return a.AppendJSON(nil) // nil too: an empty history is []
}

// Last returns the newest attempt, or false when there is none.
func (a Attempts) Last() (Attempt, bool) {
	if len(a) == 0 {
		return Attempt{}, false
	}
	return a[len(a)-1], true
}
