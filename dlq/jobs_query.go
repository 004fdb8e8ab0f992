package dlq

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// Job list paging bounds.
const (
	DefaultJobPageSize = 50
	MaxJobPageSize     = 500
)

// JobFilter narrows the job list. Zero fields do not filter. Before and
// After are keyset cursors on id (at most one is set): Before pages to older
// jobs, After to newer ones. OFFSET is never used: on a table of millions
// it reads and throws away every skipped row.
type JobFilter struct {
	State  State
	Queue  string
	Task   string
	Before int64
	After  int64
	Limit  int
}

// Values is the filter as a query string; ParseJobFilter(f.Values())
// returns f. Defaults are left out so links stay short.
func (f JobFilter) Values() url.Values {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Queue != "" {
		q.Set("queue", f.Queue)
	}
	if f.Task != "" {
		q.Set("task", f.Task)
	}
	if f.Before != 0 {
		q.Set("before", strconv.FormatInt(f.Before, 10))
	}
	if f.After != 0 {
		q.Set("after", strconv.FormatInt(f.After, 10))
	}
	if f.Limit != 0 && f.Limit != DefaultJobPageSize {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// FirstPage is the same filter without its cursor.
func (f JobFilter) FirstPage() JobFilter {
	f.Before, f.After = 0, 0
	return f
}

// JobListItem is a job as the list shows it: no payload, no history, and
// the last error cut short.
type JobListItem struct {
	ID          int64      `db:"id"`
	Queue       string     `db:"queue"`
	Task        string     `db:"task"`
	State       State      `db:"state"`
	Attempt     int        `db:"attempt"`
	MaxAttempts int        `db:"max_attempts"`
	RunAt       time.Time  `db:"run_at"`
	CreatedAt   time.Time  `db:"created_at"`
	AttemptedAt *time.Time `db:"attempted_at"`
	FinishedAt  *time.Time `db:"finished_at"`
	LeaseOwner  *string    `db:"lease_owner"`
	LastError   *string    `db:"last_error"`
	// Args and Kwargs are read to mask LastError (mask.Policy.MaskText); the
	// list does not show them.
	Args   json.RawMessage `db:"args"`
	Kwargs json.RawMessage `db:"kwargs"`
}

// JobListErrorCap is how much of a job's last error the list shows. The
// query reads 1,000 characters more, so that a secret that starts in what
// is shown is whole when it is masked, and the masking cuts it to this.
const JobListErrorCap = 300

// JobPage is one page of the job list, newest first. Older and Newer are
// the cursors of the neighbouring pages, zero when there is none.
type JobPage struct {
	Jobs  []JobListItem
	Older int64
	Newer int64
}

// Why the queries below split by state: the indexes that narrow jobs by
// queue or task both lead with something else, (state, queue, id DESC) and
// (task, state, id DESC), and both leave running jobs out (00100_queue.sql; a
// branch for running reads the few running rows through their own index). A filter on queue or task without a state is
// therefore asked once per state, each branch one short index range in id
// order, and the branches are merged: a page costs at most five ranges of
// limit+1 rows however rare the queue or task, where a single query would
// scan the table for a rare one.
//
// Succeeded jobs are the exception: those no letter links to are
// in jobs_succeeded_idx (queue, task, id DESC) only, so their branch reads
// one range per (queue, task) pair, found by skipping through that index
// (succeededPairsCTE), and merges them; the succeeded replays stay in the
// two indexes above and are one more range.

// JobTotal is how many jobs match a filter (cursor ignored). Capped is true
// when counting stopped at CountCap.
type JobTotal struct {
	N      int64
	Capped bool
}
