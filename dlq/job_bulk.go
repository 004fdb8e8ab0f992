package dlq

import (
	"fmt"
	"time"
)

// Bulk actions on live jobs: run now or kill the jobs ticked on the list,
// or every job a filter matches. Unlike a bulk replay, which can take
// hours and is a durable operation, these are one guarded statement each
// over at most MaxBulkJobs jobs, done in the request's transaction with one
// audit entry. The selection is bounded by MaxID, the newest job that
// matched when the confirmation was shown, so jobs enqueued while the
// engineer reads it are not swept in.

// JobSelection is what a bulk action on jobs acts on: IDs, or every job
// Filter matches; either way only jobs in a state the action applies to,
// and, when MaxID is set, no job newer than it.
type JobSelection struct {
	IDs    []int64
	Filter *JobFilter
	MaxID  int64
}

// Validate reports a problem with the selection's shape.
func (s JobSelection) Validate() error {
	if (len(s.IDs) == 0) == (s.Filter == nil) {
		return &ValidationError{Fields: map[string]string{"selection": "give either ids or a filter"}}
	}
	if len(s.IDs) > MaxBulkJobs {
		return &ValidationError{Fields: map[string]string{"ids": fmt.Sprintf("at most %d ids at once", MaxBulkJobs)}}
	}
	return nil
}

// JobPreview is what a bulk action would touch: how many jobs (Capped when
// over MaxBulkJobs), the newest one's id as the bound, and a sample.
type JobPreview struct {
	Matched int64         `db:"matched"`
	Capped  bool          `db:"-"`
	MaxID   int64         `db:"max_id"`
	Sample  []JobListItem `db:"-"`
}

// BulkJobParams asks for one action on many jobs.
type BulkJobParams struct {
	Action    JobAction
	Selection JobSelection
	Actor     Actor
	Reason    string
	Now       time.Time
	Key       string
	// Confirm, when set, is given the number of jobs the action will
	// change, counted under the rows' locks; an error from it stops the
	// action (a typed confirmation that does not match).
	Confirm func(n int64) error
}

// BulkJobResult is what a bulk action did. Skipped counts the jobs that
// matched when counted but had changed (claimed, finished) by the time
// they were locked.
type BulkJobResult struct {
	Action   JobAction `json:"action"`
	Matched  int64     `json:"matched"`
	Changed  int64     `json:"changed"`
	Skipped  int64     `json:"skipped"`
	AuditID  int64     `json:"audit_event_id"`
	Repeated bool      `json:"-"`
}
