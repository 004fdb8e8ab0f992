package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
)

// How long summaries are kept (00116_timings.sql): a minute's past the
// last hour the task page reads them for, an hour's past the fortnight.
const (
	keepMinuteTimings = 2 * time.Hour
	keepHourTimings   = 15 * 24 * time.Hour
)

// addTimingsSQL adds a worker's flush to the stored summaries: one row
// per task and span in $1 (a JSON array), each added to its row or
// inserted. The rows come sorted by key, so that two workers' flushes
// lock shared rows in the same order and wait rather than deadlock.
const addTimingsSQL = `
INSERT INTO task_timings AS t (task, span, start_at, runs, failures, dead, wait, run)
SELECT r.task, r.span, r.start_at, r.runs, r.failures, r.dead, r.wait, r.run
FROM jsonb_to_recordset($1::jsonb) AS r(task text, span text, start_at timestamptz,
	runs bigint, failures bigint, dead bigint, wait bigint[], run bigint[])
ORDER BY r.task, r.span, r.start_at
ON CONFLICT (task, span, start_at) DO UPDATE SET
	runs = t.runs + excluded.runs,
	failures = t.failures + excluded.failures,
	dead = t.dead + excluded.dead,
	wait = timing_histogram_add(t.wait, excluded.wait),
	run = timing_histogram_add(t.run, excluded.run)`

// timingJSON is one row of addTimingsSQL's argument.
type timingJSON struct {
	Task  string    `json:"task"`
	Span  string    `json:"span"`
	Start time.Time `json:"start_at"`
	dlq.TimingSummary
}

// AddTimings adds summaries to the stored ones with one statement, whatever
// their number: a worker's periodic flush of what it counted.
func (s *Store) AddTimings(ctx context.Context, rows []dlq.TimingRow) error {
	if len(rows) == 0 {
		return nil
	}
	out := make([]timingJSON, len(rows))
	for i, r := range rows {
		out[i] = timingJSON{Task: r.Task, Span: string(r.Span), Start: r.Start.UTC(), TimingSummary: r.TimingSummary}
		// A histogram's JSON null would be NULL in a NOT NULL column.
		if out[i].Wait == nil {
			out[i].Wait = dlq.TimingHistogram{}
		}
		if out[i].Run == nil {
			out[i].Run = dlq.TimingHistogram{}
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("add task timings: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, addTimingsSQL, string(body)); err != nil {
		return fmt.Errorf("add task timings: %w", err)
	}
	return nil
}

// pruneTimingsSQL deletes the summaries no window reads any more.
const pruneTimingsSQL = `
DELETE FROM task_timings
WHERE (span = 'minute' AND start_at < $1) OR (span = 'hour' AND start_at < $2)`

// PruneTimings deletes summaries past their keeping (keepMinuteTimings,
// keepHourTimings) and returns how many.
func (s *Store) PruneTimings(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, pruneTimingsSQL, now.Add(-keepMinuteTimings), now.Add(-keepHourTimings))
	if err != nil {
		return 0, fmt.Errorf("prune task timings: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune task timings: %w", err)
	}
	return n, nil
}

// timingsSQL reads the summaries of the windows ending at $3: the minutes
// since $1 and the hours since $2, of the task $4 or, when it is NULL, of
// every task.
const timingsSQL = `
SELECT task, span, start_at, runs, failures, dead, wait, run
FROM task_timings
WHERE ((span = 'minute' AND start_at >= $1) OR (span = 'hour' AND start_at >= $2))
	AND start_at <= $3 AND ($4::text IS NULL OR task = $4)`

// Timings reads the timings of one task (task non-empty) or of every task
// with a summary in the last fortnight, sorted by name, over the windows
// of dlq.TimingWindows ending at now. It reads the summaries only: at
// most 120 minute rows and 360 hour rows a task.
func (s *Store) Timings(ctx context.Context, task string, now time.Time) ([]dlq.TaskTimings, error) {
	windows := dlq.TimingWindows()
	since := map[dlq.TimingSpan]time.Time{}
	for _, w := range windows {
		from := windowStart(now, w)
		if cur, ok := since[w.Span]; !ok || from.Before(cur) {
			since[w.Span] = from
		}
	}
	var only *string
	if task != "" {
		only = &task
	}
	rows, err := s.db.QueryContext(ctx, timingsSQL, since[dlq.TimingMinute], since[dlq.TimingHour], now, only)
	if err != nil {
		return nil, fmt.Errorf("task timings: %w", err)
	}
	defer rows.Close()
	byTask := map[string]*dlq.TaskTimings{}
	for rows.Next() {
		var r dlq.TimingRow
		var span string
		var wait, run pq.Int64Array
		if err := rows.Scan(&r.Task, &span, &r.Start, &r.Runs, &r.Failures, &r.Dead, &wait, &run); err != nil {
			return nil, fmt.Errorf("task timings: %w", err)
		}
		r.Span, r.Wait, r.Run = dlq.TimingSpan(span), dlq.TimingHistogram(wait), dlq.TimingHistogram(run)
		t := byTask[r.Task]
		if t == nil {
			t = &dlq.TaskTimings{Task: r.Task, Windows: make([]dlq.TimingSummary, len(windows))}
			byTask[r.Task] = t
		}
		for i, w := range windows {
			if w.Span == r.Span && !r.Start.Before(windowStart(now, w)) {
				t.Windows[i].Merge(r.TimingSummary)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("task timings: %w", err)
	}
	out := make([]dlq.TaskTimings, 0, len(byTask))
	for _, t := range byTask {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out, nil
}

// windowStart is the start of the first summary a window adds up: the
// span that holds the instant Length before now.
func windowStart(now time.Time, w dlq.TimingWindow) time.Time {
	from := now.Add(-w.Length).UTC()
	if w.Span == dlq.TimingHour {
		return from.Truncate(time.Hour)
	}
	return from.Truncate(time.Minute)
}
