package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// JobListColumns are the columns of the job list, the last error cut to
// what a row shows.
const JobListColumns = `id, queue, task, state, attempt, max_attempts, run_at, created_at,
	attempted_at, finished_at, lease_owner, args, kwargs, left(last_error, 1300) AS last_error`

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
func succeededSelect(f dlq.JobFilter, columns string, extra []string, order string, limit int, args []any) (string, []any) {
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
		columns, Where(rangeConds), rangeOrder, limit, Where(pairConds), orderBy, limit)
	replayConds, args := JobConds(dlq.JobFilter{Queue: f.Queue, Task: f.Task}, []string{"state = 'succeeded'", "replay_of IS NOT NULL"}, args)
	replays := fmt.Sprintf(`(SELECT %s FROM jobs WHERE %s %s LIMIT %d)`,
		columns, Where(append(replayConds, extra...)), orderBy, limit)
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
func withSucceededPairs(query string, branches []dlq.JobFilter) string {
	for _, b := range branches {
		if b.State == dlq.StateSucceeded {
			return "WITH RECURSIVE " + succeededPairsCTE + "\n" + query
		}
	}
	return query
}

// jobBranches returns the filters to ask: f itself, or one per state when f
// narrows by queue or task but not by state.
func jobBranches(f dlq.JobFilter) []dlq.JobFilter {
	if f.State != "" || (f.Queue == "" && f.Task == "") {
		return []dlq.JobFilter{f}
	}
	out := make([]dlq.JobFilter, len(dlq.States))
	for i, s := range dlq.States {
		out[i] = f
		out[i].State = s
	}
	return out
}

// JobConds appends the filter's conditions (without the cursor) to a WHERE
// list, their values to args: values only ever travel as parameters.
func JobConds(f dlq.JobFilter, conds []string, args []any) ([]string, []any) {
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

// Where joins conditions with AND; none is TRUE.
func Where(conds []string) string {
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}

// Jobs returns one page of jobs matching f, newest first.
func (s *Store) Jobs(ctx context.Context, f dlq.JobFilter) (dlq.JobPage, error) {
	query, args, limit := jobsQuery(f)
	var rows []dlq.JobListItem
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return dlq.JobPage{}, fmt.Errorf("list jobs: %w", postgres.Translate(err))
	}
	return pageOf(rows, f, limit), nil
}

// jobsQuery is the statement of the page of jobs f asks for, its
// arguments and the page's size: it reads limit+1 rows.
func jobsQuery(f dlq.JobFilter) (query string, args []any, limit int) {
	limit = cmpLimit(f.Limit)
	// Newer jobs are read oldest first from the cursor, then reversed.
	order := "DESC"
	if f.After != 0 {
		order = "ASC"
	}
	var parts []string
	branches := jobBranches(f)
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
		if b.State == dlq.StateSucceeded {
			var part string
			part, args = succeededSelect(b, JobListColumns, cursor, order, limit+1, args)
			parts = append(parts, part)
			continue
		}
		var conds []string
		conds, args = JobConds(b, nil, args)
		parts = append(parts, fmt.Sprintf(`(SELECT %s FROM jobs WHERE %s ORDER BY id %s LIMIT %d)`,
			JobListColumns, Where(append(conds, cursor...)), order, limit+1))
	}
	query = parts[0]
	if len(parts) > 1 {
		query = fmt.Sprintf(`SELECT * FROM (%s) j ORDER BY id %s LIMIT %d`, strings.Join(parts, "\nUNION ALL\n"), order, limit+1)
	}
	return withSucceededPairs(query, branches), args, limit
}

// pageOf trims the limit+1 rows read to one page, newest first, and works
// out the cursors of the neighbouring pages.
func pageOf(rows []dlq.JobListItem, f dlq.JobFilter, limit int) dlq.JobPage {
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	if f.After != 0 {
		slices.Reverse(rows)
	}
	page := dlq.JobPage{Jobs: rows}
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
	if n < 1 || n > dlq.MaxJobPageSize {
		return dlq.DefaultJobPageSize
	}
	return n
}

// CountJobs counts the jobs matching f. Active states are counted exactly:
// those rows are few and sit in one index range each. Succeeded and dead
// stop at CountCap, so the cost of a page view never grows with the
// number of finished jobs. Without a state filter the total is the sum of
// the per-state counts, capped when any of them is.
func (s *Store) CountJobs(ctx context.Context, f dlq.JobFilter) (dlq.JobTotal, error) {
	var args []any
	var parts []string
	branches := jobBranches(f)
	for _, b := range branches {
		if b.State == dlq.StateSucceeded {
			// Any CountCap+1 of them tell the count is capped, in no
			// particular order.
			var rows string
			rows, args = succeededSelect(b, "id", nil, "", dlq.CountCap+1, args)
			parts = append(parts, fmt.Sprintf(`SELECT least(count(*), %[2]d) AS n, count(*) > %[2]d AS capped
			FROM %[1]s x`, rows, dlq.CountCap))
			continue
		}
		var conds []string
		conds, args = JobConds(b, nil, args)
		if b.State.ActiveState() {
			parts = append(parts, fmt.Sprintf(`SELECT count(*) AS n, false AS capped FROM jobs WHERE %s`, Where(conds)))
			continue
		}
		parts = append(parts, fmt.Sprintf(`SELECT least(count(*), %[2]d) AS n, count(*) > %[2]d AS capped
			FROM (SELECT 1 FROM jobs WHERE %[1]s LIMIT %[3]d) x`, Where(conds), dlq.CountCap, dlq.CountCap+1))
	}
	query := withSucceededPairs(fmt.Sprintf(`SELECT COALESCE(sum(n), 0)::bigint AS n, COALESCE(bool_or(capped), false) AS capped FROM (%s) c`,
		strings.Join(parts, "\nUNION ALL\n")), branches)
	var t struct {
		N      int64 `db:"n"`
		Capped bool  `db:"capped"`
	}
	if err := s.db.GetContext(ctx, &t, query, args...); err != nil {
		return dlq.JobTotal{}, fmt.Errorf("count jobs: %w", postgres.Translate(err))
	}
	return dlq.JobTotal{N: t.N, Capped: t.Capped}, nil
}

// JobCounts counts jobs by queue and state, each count stopping at limit.
func (s *Store) JobCounts(ctx context.Context, limit int) ([]dlq.JobCount, error) {
	return JobCounts(ctx, s.db, limit)
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
		return 0, fmt.Errorf("dead letter of job %d: %w", jobID, postgres.Translate(err))
	}
	return id, nil
}
