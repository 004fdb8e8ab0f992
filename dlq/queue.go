package dlq

import (
	"time"
)

// The queries the worker runs against a claimed job. Each write is guarded
// by the lease (lease_owner, the claim's attempt and state in the WHERE
// clause): a worker whose lease expired and whose job was rescued, by
// another worker or by itself, cannot clobber the newer run's outcome; its
// write simply matches no row and reports ErrConflict.

// Position is a place in a queue's claim order (run_at, then id): a claim
// after it leaves the jobs at or before it alone.
type Position struct {
	RunAt time.Time
	ID    int64
}

// PositionOf is job's place in its queue's claim order.
func PositionOf(j Job) Position { return Position{RunAt: j.RunAt, ID: j.ID} }

// Before reports whether p comes before q in claim order.
func (p Position) Before(q Position) bool {
	return p.RunAt.Before(q.RunAt) || p.RunAt.Equal(q.RunAt) && p.ID < q.ID
}

// Lease names one claim of a job: the worker that claimed it and the
// attempt the claim started. Every write of an outcome, and every renewal,
// is guarded by the whole lease, not only the worker: a worker whose lease
// expired mid-run can claim the same job again after a rescue, and the
// stale run must then not write over the new one.
type Lease struct {
	Worker  string
	JobID   int64
	Attempt int
}

// LeaseOf is the lease a worker holds on a job it claimed.
func LeaseOf(worker string, j Job) Lease {
	return Lease{Worker: worker, JobID: j.ID, Attempt: j.Attempt}
}

// RetryOutcome is one failed attempt to record and reschedule.
type RetryOutcome struct {
	Lease   Lease
	Delay   time.Duration
	Attempt Attempt
}

// ClaimLostClass describes the history entry of a job handed back because
// its claim's reply never reached the worker.
const ClaimLostClass = "ClaimLost"

// LostOutcome is the outcome of an attempt whose handler ran but that
// could not be written before another claim took the job (see
// RecordLostOutcomes).
type LostOutcome struct {
	Lease Lease
	// Attempt describes the run: when it ended, where, and how (its
	// message says what became of it). Its class and outcome are set by
	// RecordLostOutcomes.
	Attempt Attempt
}

// DeadOutcome is one final failed attempt: the job is dead-lettered.
type DeadOutcome struct {
	Lease   Lease
	Task    string
	Reason  Reason
	Attempt Attempt
}

// DeadLetterResult pairs a dead-lettered job with its letter.
type DeadLetterResult struct {
	JobID    int64 `db:"job_id"`
	LetterID int64 `db:"id"`
}
