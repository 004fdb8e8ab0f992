package dlq

import (
	"time"
)

// "redrive" + 1

// SucceededKept describes the succeeded jobs the cleaner may still delete.
type SucceededKept struct {
	// Estimate is Postgres's own count of them (pg_class.reltuples of
	// jobs_succeeded_idx, refreshed by autovacuum and ANALYZE): an exact
	// count would read millions of rows on every page view.
	Estimate int64
	// Oldest is when the oldest of them finished, zero when there is
	// none: the oldest of the first 100 of each (queue, task) pair by id,
	// where the cleaner starts (see deleteSucceededSQL).
	// It misses a job that finished earlier than all of those only if it
	// was enqueued after them and finished before them all.
	Oldest time.Time
}
