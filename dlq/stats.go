package dlq

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
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

const statusCountsSQL = `
SELECT status, COALESCE(sum(n), 0)::bigint AS n FROM dead_letter_counts GROUP BY status`

// statePairsCTE finds each (state, queue) pair present in jobs. The
// settled states come from a recursive "loose index scan" over
// jobs_state_queue_idx: one index probe per pair, however many rows each
// pair holds. That index leaves running jobs out (00100_queue.sql), and
// those are few: their queues are read from jobs_running_lease_idx. It
// also leaves out the succeeded jobs no letter links to, whose
// queues come from the same kind of scan of jobs_succeeded_idx.
const statePairsCTE = `settled(state, queue) AS (
	(SELECT state, queue FROM jobs WHERE ` + settledIndexed + ` ORDER BY state, queue LIMIT 1)
	UNION ALL
	SELECT nxt.state, nxt.queue FROM settled p
	CROSS JOIN LATERAL (
		SELECT j.state, j.queue FROM jobs j
		WHERE ` + settledIndexed + ` AND (j.state, j.queue) > (p.state, p.queue)
		ORDER BY j.state, j.queue LIMIT 1
	) nxt
), ` + succeededPairsCTE + `, pairs(state, queue) AS (
	SELECT state, queue FROM settled
	UNION
	SELECT 'succeeded', queue FROM succeeded_pairs
	UNION
	SELECT DISTINCT state, queue FROM jobs WHERE state = 'running'
)`

// settledIndexed is the predicate of jobs_state_queue_idx and
// jobs_task_state_idx (00100_queue.sql), which a query repeats to be read
// from them.
const settledIndexed = `state <> 'running' AND (state <> 'succeeded' OR replay_of IS NOT NULL)`

// statePairsSQL lists the (state, queue) pairs present in jobs.
const statePairsSQL = `WITH RECURSIVE ` + statePairsCTE + `
SELECT state, queue FROM pairs`

// inflowSQL reads letters per UTC hour from $1 up to $2 from the totals
// that 00101_letters.sql keeps: one row per hour, whatever the number of
// fingerprints. Days are summed from these hours in Go.
const inflowSQL = `
SELECT hour AS bucket, n FROM dead_letter_inflow_totals
WHERE hour >= $1 AND hour < $2`

const topTasksSQL = `
SELECT task, sum(n)::bigint AS pending FROM dead_letter_counts
WHERE status = 'pending' GROUP BY task HAVING sum(n) > 0
ORDER BY 2 DESC, 1 LIMIT $1`

const workerStatusSQL = `
SELECT id, host, pid, version, queues, tasks, concurrency, in_flight, started_at, heartbeat_at,
	(extract(epoch FROM now() - heartbeat_at) * 1000)::bigint AS age_ms
FROM workers ORDER BY host, started_at, id`

// Overview reads the front page's numbers in one read-only, repeatable-read
// transaction, so the counts, charts and rankings agree with each other.
func (s *Store) Overview(ctx context.Context) (Overview, error) {
	var o Overview
	err := s.readOnly(ctx, func(tx *sqlx.Tx) error {
		if err := tx.GetContext(ctx, &o.Now, `SELECT now()`); err != nil {
			return fmt.Errorf("clock: %w", err)
		}
		var err error
		if o.DeadLetters, err = statusCounts(ctx, tx); err != nil {
			return err
		}
		if o.Jobs, err = jobCounts(ctx, tx, OverviewCountCap); err != nil {
			return err
		}
		if o.Hourly, o.Daily, err = inflow(ctx, tx, o.Now); err != nil {
			return err
		}
		if err := tx.SelectContext(ctx, &o.TopTasks, topTasksSQL, OverviewLimit); err != nil {
			return fmt.Errorf("top tasks: %w", err)
		}
		o.Workers, err = workerStatuses(ctx, tx)
		return err
	})
	if err != nil {
		return Overview{}, fmt.Errorf("overview: %w", err)
	}
	return o, nil
}

// WorkerStatuses lists registered workers with the age of their heartbeat.
func (s *Store) WorkerStatuses(ctx context.Context) ([]WorkerStatus, error) {
	ws, err := workerStatuses(ctx, s.db)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

// readOnly runs fn in a read-only repeatable-read transaction: one snapshot
// for every query fn runs. The options go in BEGIN itself: without
// ReadOnly, lib/pq begins with READ WRITE, which a hot standby refuses
// ("cannot set transaction read-write mode during recovery").
func (s *Store) readOnly(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func statusCounts(ctx context.Context, q sqlx.QueryerContext) (StatusCounts, error) {
	var rows []struct {
		Status Status `db:"status"`
		N      int64  `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, statusCountsSQL); err != nil {
		return StatusCounts{}, fmt.Errorf("dead-letter counts: %w", err)
	}
	var c StatusCounts
	for _, r := range rows {
		switch r.Status {
		case StatusPending:
			c.Pending = r.N
		case StatusReplayed:
			c.Replayed = r.N
		case StatusDiscarded:
			c.Discarded = r.N
		}
	}
	return c, nil
}

// jobCounts counts the jobs of each (state, queue) pair, each up to limit
// (a count of limit+1 comes back as limit, capped). Each pair is its own
// branch with its values as parameters, so the planner sizes each from the
// column statistics: a single query joining the pairs laterally is planned
// once for "some state, some queue" and picked a sequential scan per pair
// on 200,000 jobs (800 ms).
func jobCounts(ctx context.Context, q sqlx.QueryerContext, limit int) ([]JobCount, error) {
	var pairs []struct {
		State State  `db:"state"`
		Queue string `db:"queue"`
	}
	if err := sqlx.SelectContext(ctx, q, &pairs, statePairsSQL); err != nil {
		return nil, fmt.Errorf("job counts: %w", err)
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	var parts []string
	args := []any{limit}
	for _, p := range pairs {
		args = append(args, string(p.State), p.Queue)
		rows := fmt.Sprintf(`(SELECT 1 FROM jobs WHERE state = $%[1]d AND queue = $%[2]d LIMIT $1::int + 1)`, len(args)-1, len(args))
		if p.State == StateSucceeded {
			// Two indexes hold them (see statePairsCTE): a range of each.
			rows = fmt.Sprintf(`((SELECT 1 FROM jobs WHERE state = 'succeeded' AND replay_of IS NULL AND queue = $%[1]d LIMIT $1::int + 1)
				UNION ALL (SELECT 1 FROM jobs WHERE state = 'succeeded' AND replay_of IS NOT NULL AND queue = $%[1]d LIMIT $1::int + 1))`, len(args))
		}
		parts = append(parts, fmt.Sprintf(`SELECT $%[1]d::text AS state, $%[2]d::text AS queue, count(*) AS n
			FROM %[3]s x`, len(args)-1, len(args), rows))
	}
	query := `SELECT queue, state, least(n, $1::int) AS n, n > $1::int AS capped FROM (` +
		strings.Join(parts, "\nUNION ALL\n") + `) c ORDER BY queue, state`
	var counts []JobCount
	if err := sqlx.SelectContext(ctx, q, &counts, query, args...); err != nil {
		return nil, fmt.Errorf("job counts: %w", err)
	}
	return counts, nil
}

// inflow returns the letters per hour of the 24 hours and per UTC day of
// the 14 days that end with the ones holding now, oldest first.
func inflow(ctx context.Context, q sqlx.QueryerContext, now time.Time) (hourly, daily []InflowBucket, err error) {
	hourEnd := now.UTC().Truncate(time.Hour).Add(time.Hour)
	dayEnd := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	dayStart := dayEnd.Add(-14 * 24 * time.Hour)
	// The 14 days end no earlier and start no later than the 24 hours, so
	// one read of the days holds every hour both charts need.
	var got []InflowBucket
	if err := sqlx.SelectContext(ctx, q, &got, inflowSQL, dayStart, dayEnd); err != nil {
		return nil, nil, fmt.Errorf("inflow: %w", err)
	}
	hourly = bucketize(got, hourEnd.Add(-24*time.Hour), hourEnd, time.Hour)
	daily = bucketize(got, dayStart, dayEnd, 24*time.Hour)
	return hourly, daily, nil
}

// bucketize sums hourly counts into buckets of width from start to end,
// every bucket present (zero when nothing failed in it), oldest first.
func bucketize(hours []InflowBucket, start, end time.Time, width time.Duration) []InflowBucket {
	var out []InflowBucket
	for t := start.UTC(); t.Before(end); t = t.Add(width) {
		out = append(out, InflowBucket{Start: t})
	}
	for _, h := range hours {
		if h.Start.Before(start) || !h.Start.Before(end) {
			continue
		}
		out[int(h.Start.Sub(start)/width)].N += h.N
	}
	return out
}

func workerStatuses(ctx context.Context, q sqlx.QueryerContext) ([]WorkerStatus, error) {
	var ws []WorkerStatus
	if err := sqlx.SelectContext(ctx, q, &ws, workerStatusSQL); err != nil {
		return nil, fmt.Errorf("worker status: %w", err)
	}
	for i := range ws {
		ws[i].HeartbeatAge = time.Duration(ws[i].AgeMS) * time.Millisecond
	}
	return ws, nil
}

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

const deadLetterCountsSQL = `
SELECT task, queue, status, n FROM dead_letter_counts ORDER BY task, queue, status`

// activeJobCountsSQL counts waiting and running jobs by queue and state.
// Waiting jobs sit in one range of jobs_state_queue_idx per state; running
// ones, which that index leaves out, in jobs_running_lease_idx.
const activeJobCountsSQL = `
SELECT queue, state, count(*) AS n, false AS capped FROM jobs
WHERE state IN ('available', 'retrying') GROUP BY queue, state
UNION ALL
SELECT queue, state, count(*), false FROM jobs
WHERE state = 'running' GROUP BY queue, state
ORDER BY queue, state`

// MetricsSnapshot reads the domain gauges in one snapshot.
func (s *Store) MetricsSnapshot(ctx context.Context) (MetricsSnapshot, error) {
	var m MetricsSnapshot
	err := s.readOnly(ctx, func(tx *sqlx.Tx) error {
		if err := tx.SelectContext(ctx, &m.DeadLetters, deadLetterCountsSQL); err != nil {
			return fmt.Errorf("dead-letter counts: %w", err)
		}
		if err := tx.SelectContext(ctx, &m.Jobs, activeJobCountsSQL); err != nil {
			return fmt.Errorf("job counts: %w", err)
		}
		var err error
		if m.Succeeded, err = succeededKept(ctx, tx); err != nil {
			return err
		}
		m.Workers, err = workerStatuses(ctx, tx)
		return err
	})
	if err != nil {
		return MetricsSnapshot{}, fmt.Errorf("metrics snapshot: %w", err)
	}
	return m, nil
}
