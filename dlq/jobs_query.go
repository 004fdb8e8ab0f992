package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// ParseJobFilter reads a filter from a query string. A bad value is a
// *ValidationError naming the parameter, so the console can answer 400 with
// words rather than an empty list. Unknown parameters are ignored.
func ParseJobFilter(q url.Values) (JobFilter, error) {
	f := JobFilter{Limit: DefaultJobPageSize}
	problems := map[string]string{}
	if v := q.Get("state"); v != "" {
		if s := State(v); s.Valid() {
			f.State = s
		} else {
			problems["state"] = fmt.Sprintf("must be one of %s", joinStates(States))
		}
	}
	for _, p := range []struct {
		key     string
		dst     *string
		problem func(string) string
	}{{"queue", &f.Queue, QueueNameProblem}, {"task", &f.Task, TaskNameProblem}} {
		v := q.Get(p.key)
		if v == "" {
			continue
		}
		if msg := p.problem(v); msg != "" {
			problems[p.key] = msg
			continue
		}
		*p.dst = v
	}
	f.Before = parseCursor(q.Get("before"), "before", problems)
	f.After = parseCursor(q.Get("after"), "after", problems)
	if f.Before != 0 && f.After != 0 {
		problems["after"] = "cannot be combined with before"
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxJobPageSize {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxJobPageSize)
		} else {
			f.Limit = n
		}
	}
	if len(problems) > 0 {
		return JobFilter{}, &ValidationError{Fields: problems}
	}
	return f, nil
}

func parseCursor(v, key string, problems map[string]string) int64 {
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		problems[key] = "must be a job id (a positive whole number)"
		return 0
	}
	return n
}

func joinStates(ss []State) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
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

const jobListColumns = `id, queue, task, state, attempt, max_attempts, run_at, created_at,
	attempted_at, finished_at, lease_owner, args, kwargs, left(last_error, 1300) AS last_error`

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

// succeededPairsCTE finds each (queue, task) pair of the succeeded jobs no
// letter links to, with a "loose index scan" of jobs_succeeded_idx: one
// probe per pair, however many jobs each holds.
const succeededPairsCTE = `succeeded_pairs(queue, task) AS (
	(SELECT queue, task FROM jobs WHERE state = 'succeeded' AND replay_of IS NULL ORDER BY queue, task LIMIT 1)
	UNION ALL
	SELECT nxt.queue, nxt.task FROM succeeded_pairs p
	CROSS JOIN LATERAL (
		SELECT j.queue, j.task FROM jobs j
		WHERE j.state = 'succeeded' AND j.replay_of IS NULL AND (j.queue, j.task) > (p.queue, p.task)
		ORDER BY j.queue, j.task LIMIT 1
	) nxt
)`

// succeededSelect is the SELECT of at most limit succeeded jobs matching
// f's queue and task and the extra conditions (a cursor on id), in id
// order (order ASC or DESC), or in no order when order is empty (a count
// then stops after limit rows in all): each pair's range of
// jobs_succeeded_idx, and the replays. The query must start WITH
// RECURSIVE succeededPairsCTE.
func succeededSelect(f JobFilter, columns string, extra []string, order string, limit int, args []any) (string, []any) {
	orderBy := ""
	if order != "" {
		orderBy = "ORDER BY id " + order
	}
	// Each pair's range is read in the index's own order, which only
	// jobs_succeeded_idx has (succeededIndexOrder), also for a count.
	rangeOrder := succeededIndexOrder
	if order == "ASC" {
		rangeOrder = succeededIndexOrderASC
	}
	var pairConds []string
	add := func(cond string, v any) {
		args = append(args, v)
		pairConds = append(pairConds, fmt.Sprintf(cond, len(args)))
	}
	if f.Queue != "" {
		add("p.queue = $%d", f.Queue)
	}
	if f.Task != "" {
		add("p.task = $%d", f.Task)
	}
	rangeConds := append([]string{"state = 'succeeded'", "replay_of IS NULL", "queue = p.queue", "task = p.task"}, extra...)
	plain := fmt.Sprintf(`(SELECT s.* FROM succeeded_pairs p CROSS JOIN LATERAL (
		SELECT %s FROM jobs WHERE %s %s LIMIT %d) s
	WHERE %s %s LIMIT %d)`,
		columns, where(rangeConds), rangeOrder, limit, where(pairConds), orderBy, limit)
	replayConds, args := JobFilter{Queue: f.Queue, Task: f.Task}.conds([]string{"state = 'succeeded'", "replay_of IS NOT NULL"}, args)
	replays := fmt.Sprintf(`(SELECT %s FROM jobs WHERE %s %s LIMIT %d)`,
		columns, where(append(replayConds, extra...)), orderBy, limit)
	return fmt.Sprintf(`(SELECT * FROM (%s UNION ALL %s) s %s LIMIT %d)`, plain, replays, orderBy, limit), args
}

// succeededIndexOrder is the order of jobs_succeeded_idx within a (queue,
// task) pair, and succeededIndexOrderASC its reverse. id is never NULL:
// the NULLS clauses only make the primary key unable to serve the order
// (00100_queue.sql), so that the planner, which cannot know how rare a pair is,
// does not walk the primary key to find a rare pair's jobs.
const (
	succeededIndexOrder    = "ORDER BY id DESC NULLS LAST"
	succeededIndexOrderASC = "ORDER BY id ASC NULLS FIRST"
)

// withSucceededPairs prefixes query with succeededPairsCTE when one of
// the branches reads succeeded jobs.
func withSucceededPairs(query string, branches []JobFilter) string {
	for _, b := range branches {
		if b.State == StateSucceeded {
			return "WITH RECURSIVE " + succeededPairsCTE + "\n" + query
		}
	}
	return query
}

// branches returns the filters to ask: f itself, or one per state when f
// narrows by queue or task but not by state.
func (f JobFilter) branches() []JobFilter {
	if f.State != "" || (f.Queue == "" && f.Task == "") {
		return []JobFilter{f}
	}
	out := make([]JobFilter, len(States))
	for i, s := range States {
		out[i] = f
		out[i].State = s
	}
	return out
}

// conds appends the filter's conditions (without the cursor) to a WHERE
// list, their values to args: values only ever travel as parameters.
func (f JobFilter) conds(conds []string, args []any) ([]string, []any) {
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.State != "" {
		add("state = $%d", string(f.State))
	}
	if f.Queue != "" {
		add("queue = $%d", f.Queue)
	}
	if f.Task != "" {
		add("task = $%d", f.Task)
	}
	return conds, args
}

func where(conds []string) string {
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}

// Jobs returns one page of jobs matching f, newest first.
func (s *Store) Jobs(ctx context.Context, f JobFilter) (JobPage, error) {
	query, args, limit := jobsQuery(f)
	var rows []JobListItem
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return JobPage{}, fmt.Errorf("list jobs: %w", translate(err))
	}
	return pageOf(rows, f, limit), nil
}

// jobsQuery is the statement of the page of jobs f asks for, its
// arguments and the page's size: it reads limit+1 rows.
func jobsQuery(f JobFilter) (query string, args []any, limit int) {
	limit = cmpLimit(f.Limit)
	// Newer jobs are read oldest first from the cursor, then reversed.
	order := "DESC"
	if f.After != 0 {
		order = "ASC"
	}
	var parts []string
	branches := f.branches()
	for _, b := range branches {
		var cursor []string
		switch {
		case f.Before != 0:
			args = append(args, f.Before)
			cursor = append(cursor, fmt.Sprintf("id < $%d", len(args)))
		case f.After != 0:
			args = append(args, f.After)
			cursor = append(cursor, fmt.Sprintf("id > $%d", len(args)))
		}
		if b.State == StateSucceeded {
			var part string
			part, args = succeededSelect(b, jobListColumns, cursor, order, limit+1, args)
			parts = append(parts, part)
			continue
		}
		var conds []string
		conds, args = b.conds(nil, args)
		parts = append(parts, fmt.Sprintf(`(SELECT %s FROM jobs WHERE %s ORDER BY id %s LIMIT %d)`,
			jobListColumns, where(append(conds, cursor...)), order, limit+1))
	}
	query = parts[0]
	if len(parts) > 1 {
		query = fmt.Sprintf(`SELECT * FROM (%s) j ORDER BY id %s LIMIT %d`, strings.Join(parts, "\nUNION ALL\n"), order, limit+1)
	}
	return withSucceededPairs(query, branches), args, limit
}

// pageOf trims the limit+1 rows read to one page, newest first, and works
// out the cursors of the neighbouring pages.
func pageOf(rows []JobListItem, f JobFilter, limit int) JobPage {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	if f.After != 0 {
		slices.Reverse(rows)
	}
	page := JobPage{Jobs: rows}
	if len(rows) == 0 {
		return page
	}
	// Moving in one direction, "more" tells whether that side goes on; the
	// side we came from goes on by construction.
	newest, oldest := rows[0].ID, rows[len(rows)-1].ID
	switch {
	case f.After != 0:
		page.Older = oldest
		if more {
			page.Newer = newest
		}
	case f.Before != 0:
		page.Newer = newest
		if more {
			page.Older = oldest
		}
	default:
		if more {
			page.Older = oldest
		}
	}
	return page
}

func cmpLimit(n int) int {
	if n < 1 || n > MaxJobPageSize {
		return DefaultJobPageSize
	}
	return n
}

// JobTotal is how many jobs match a filter (cursor ignored). Capped is true
// when counting stopped at CountCap.
type JobTotal struct {
	N      int64
	Capped bool
}

// CountJobs counts the jobs matching f. Active states are counted exactly:
// those rows are few and sit in one index range each. Succeeded and dead
// stop at CountCap, so the cost of a page view never grows with the
// number of finished jobs. Without a state filter the total is the sum of
// the per-state counts, capped when any of them is.
func (s *Store) CountJobs(ctx context.Context, f JobFilter) (JobTotal, error) {
	var args []any
	var parts []string
	branches := f.branches()
	for _, b := range branches {
		if b.State == StateSucceeded {
			// Any CountCap+1 of them tell the count is capped, in no
			// particular order.
			var rows string
			rows, args = succeededSelect(b, "id", nil, "", CountCap+1, args)
			parts = append(parts, fmt.Sprintf(`SELECT least(count(*), %[2]d) AS n, count(*) > %[2]d AS capped
			FROM %[1]s x`, rows, CountCap))
			continue
		}
		var conds []string
		conds, args = b.conds(nil, args)
		if b.State.ActiveState() {
			parts = append(parts, fmt.Sprintf(`SELECT count(*) AS n, false AS capped FROM jobs WHERE %s`, where(conds)))
			continue
		}
		parts = append(parts, fmt.Sprintf(`SELECT least(count(*), %[2]d) AS n, count(*) > %[2]d AS capped
			FROM (SELECT 1 FROM jobs WHERE %[1]s LIMIT %[3]d) x`, where(conds), CountCap, CountCap+1))
	}
	query := withSucceededPairs(fmt.Sprintf(`SELECT COALESCE(sum(n), 0)::bigint AS n, COALESCE(bool_or(capped), false) AS capped FROM (%s) c`,
		strings.Join(parts, "\nUNION ALL\n")), branches)
	var t struct {
		N      int64 `db:"n"`
		Capped bool  `db:"capped"`
	}
	if err := s.db.GetContext(ctx, &t, query, args...); err != nil {
		return JobTotal{}, fmt.Errorf("count jobs: %w", translate(err))
	}
	return JobTotal{N: t.N, Capped: t.Capped}, nil
}

// JobCounts counts jobs by queue and state, each count stopping at limit.
func (s *Store) JobCounts(ctx context.Context, limit int) ([]JobCount, error) {
	return jobCounts(ctx, s.db, limit)
}

// TaskNames lists every task a worker has registered, for filter choices.
func (s *Store) TaskNames(ctx context.Context) ([]string, error) {
	var names []string
	if err := s.db.SelectContext(ctx, &names, `SELECT name FROM tasks ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return names, nil
}

// jobQueuesSQL lists the queues that hold jobs from the (state, queue)
// pairs found by skipping through the state index: a few dozen probes
// rather than a scan.
const jobQueuesSQL = `WITH RECURSIVE ` + statePairsCTE + `
SELECT DISTINCT queue FROM pairs ORDER BY queue`

// JobQueues lists the queues that currently hold jobs.
func (s *Store) JobQueues(ctx context.Context) ([]string, error) {
	var queues []string
	if err := s.db.SelectContext(ctx, &queues, jobQueuesSQL); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return queues, nil
}

// DeadLetterIDForJob returns the id of the dead letter a job became, or
// ErrNotFound when it has none.
func (s *Store) DeadLetterIDForJob(ctx context.Context, jobID int64) (int64, error) {
	var id int64
	if err := s.db.GetContext(ctx, &id, `SELECT id FROM dead_letters WHERE job_id = $1`, jobID); err != nil {
		return 0, fmt.Errorf("dead letter of job %d: %w", jobID, translate(err))
	}
	return id, nil
}
