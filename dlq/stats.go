package dlq

import (
	"time"
)

// The console's numbers. Every query here reads a summary table kept by
// triggers (dead_letter_counts, dead_letter_inflow), the small workers
// table, or a bounded slice of jobs: none scans dead_letters, so the
// overview costs the same with ten letters or ten million. The overview's
// ranked groups are ListGroups' (groups.go), read once in the order the
// page asks for.

// CountCap is where job counts of the unbounded states (succeeded, dead)
// stop: counting a million finished jobs on every page view would cost more
// than the number is worth. A count equal to CountCap means "at least".
const CountCap = 10_000

// OverviewCountCap is where the overview's job counts stop, for every
// state: the front page refreshes every few seconds and shows every queue
// and state at once. The job list counts one filter, exactly for the
// active states; /metrics exports them exactly too.
const OverviewCountCap = 1_000

// WorkerStaleAfter is how old a worker's heartbeat may be before the console
// calls the worker stale. Workers beat every LeaseDuration/3 (10 s by
// default); six missed beats mean the process is gone or wedged.
const WorkerStaleAfter = 60 * time.Second

// ActiveState reports whether s is one of the states a job leaves on its own
// (available, retrying, running). Those rows are few, partially indexed and
// counted exactly; succeeded and dead rows pile up and are counted capped.
func (s State) ActiveState() bool {
	return s == StateAvailable || s == StateRetrying || s == StateRunning
}

// StatusCounts is how many dead letters there are in each status.
type StatusCounts struct {
	Pending   int64
	Replayed  int64
	Discarded int64
}

// Total is the number of letters in every status.
func (c StatusCounts) Total() int64 { return c.Pending + c.Replayed + c.Discarded }

// JobCount is the number of jobs of one queue in one state. Capped is true
// when the count stopped at CountCap and the real number may be higher.
type JobCount struct {
	Queue  string `db:"queue"`
	State  State  `db:"state"`
	N      int64  `db:"n"`
	Capped bool   `db:"capped"`
}

// InflowBucket is how many letters failed in [Start, Start+width).
type InflowBucket struct {
	Start time.Time `db:"bucket"`
	N     int64     `db:"n"`
}

// TaskPending is the number of pending letters of one task.
type TaskPending struct {
	Task    string `db:"task"`
	Pending int64  `db:"pending"`
}

// WorkerStatus is a registered worker and how fresh its heartbeat is, as
// measured by the database clock that also stamped the heartbeat, so a
// console host with a skewed clock cannot call a healthy worker stale.
type WorkerStatus struct {
	WorkerInfo
	HeartbeatAge time.Duration `db:"-"`
	// AgeMS carries HeartbeatAge out of the query.
	AgeMS int64 `db:"age_ms"`
}

// Stale reports whether the worker has missed enough heartbeats to be
// presumed dead.
func (w WorkerStatus) Stale() bool { return w.HeartbeatAge > WorkerStaleAfter }

// Overview is everything the console's front page shows.
type Overview struct {
	// Now is the database's clock when the numbers were read.
	Now         time.Time
	DeadLetters StatusCounts
	Jobs        []JobCount
	// Hourly has 24 buckets ending with the current hour; Daily has 14
	// buckets (UTC days) ending with today. Oldest first, gaps filled with 0.
	Hourly []InflowBucket
	Daily  []InflowBucket
	// TopTasks ranks the tasks by pending letters. The overview's ranked
	// error groups come from ListGroups, in the order the reader chose.
	TopTasks []TaskPending
	Workers  []WorkerStatus
}

// OverviewLimit is how many groups and tasks the overview ranks.
const OverviewLimit = 8

// MetricsSnapshot is what /metrics exports about the domain, read at
// scrape time.
type MetricsSnapshot struct {
	// DeadLetters has one row per task, queue and status.
	DeadLetters []DeadLetterCount
	// Jobs counts only the active states (available, retrying, running),
	// exactly: finished jobs pile up without bound and a scrape every few
	// seconds must not count them.
	Jobs    []JobCount
	Workers []WorkerStatus
	// Succeeded is what the cleaner still keeps of succeeded jobs.
	Succeeded SucceededKept
}

// DeadLetterCount is the number of letters of one task and queue in one status.
type DeadLetterCount struct {
	Task   string `db:"task"`
	Queue  string `db:"queue"`
	Status Status `db:"status"`
	N      int64  `db:"n"`
}
