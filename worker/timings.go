package worker

import (
	"context"
	"sync"
	"time"

	"github.com/redrive/redrive/dlq"
)

// DefaultTimingsInterval is how often a worker flushes the per-task
// timings it counted: the task page is at most this late.
const DefaultTimingsInterval = dlq.TimingsFlushInterval

// timingKey names one summary a worker is counting: a task over one span.
type timingKey struct {
	task  string
	span  dlq.TimingSpan
	start time.Time
}

// timings counts, in memory, what the worker's settled outcomes say of
// each task (runs, failures, dead letters, queue wait and run time, see
// dlq.TimingBucket), by minute and by hour, until the next flush writes
// them with one statement (queue.Store.AddTimings). The completer feeds it
// once per written batch, under one lock, from what it already holds: the
// job's run_at and claim time, and the attempt's duration. No job costs a
// statement of its own.
type timings struct {
	mu      sync.Mutex
	pending map[timingKey]*dlq.TimingSummary
}

func newTimings() *timings {
	return &timings{pending: map[timingKey]*dlq.TimingSummary{}}
}

// timed is one attempt as the timings count it.
type timed struct {
	task      string
	at        time.Time
	wait, ran time.Duration
	failed    bool
	dead      bool
}

// add counts a batch of attempts.
func (t *timings) add(batch []timed) {
	if len(batch) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A batch is mostly one task in one minute: the summaries of the
	// previous attempt are looked up again only when these change.
	var last timingKey
	var minute, hour *dlq.TimingSummary
	for _, a := range batch {
		start := a.at.UTC().Truncate(time.Minute)
		if minute == nil || a.task != last.task || !start.Equal(last.start) {
			last = timingKey{task: a.task, span: dlq.TimingMinute, start: start}
			minute = t.summary(last)
			hour = t.summary(timingKey{task: a.task, span: dlq.TimingHour, start: start.Truncate(time.Hour)})
		}
		for _, s := range [2]*dlq.TimingSummary{minute, hour} {
			s.Runs++
			if a.failed {
				s.Failures++
			}
			if a.dead {
				s.Dead++
			}
			s.Wait.Add(a.wait)
			s.Run.Add(a.ran)
		}
	}
}

// summary returns the summary being counted for k. t.mu must be held.
func (t *timings) summary(k timingKey) *dlq.TimingSummary {
	s := t.pending[k]
	if s == nil {
		s = &dlq.TimingSummary{}
		t.pending[k] = s
	}
	return s
}

// take removes and returns what was counted since the last take.
func (t *timings) take() []dlq.TimingRow {
	t.mu.Lock()
	defer t.mu.Unlock()
	rows := make([]dlq.TimingRow, 0, len(t.pending))
	for k, s := range t.pending {
		rows = append(rows, dlq.TimingRow{Task: k.task, Span: k.span, Start: k.start, TimingSummary: *s})
	}
	clear(t.pending)
	return rows
}

// putBack counts again rows a flush could not write, for the next flush
// to try: a database away for a while delays the timings, it does not
// lose them. Rows past every window's reach are let go, which bounds
// what an outage can pile up.
func (t *timings) putBack(rows []dlq.TimingRow, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range rows {
		if r.Span == dlq.TimingMinute && r.Start.Before(now.Add(-time.Hour)) {
			continue
		}
		t.summary(timingKey{task: r.Task, span: r.Span, start: r.Start}).Merge(r.TimingSummary)
	}
}

// timed returns what the timings count of an outcome: the wait is from
// when the job was due (run_at) to its claim, both by the database's
// clock; the run time is the handler's, by the worker's.
func (o outcome) timed() timed {
	job := o.active.job
	var wait time.Duration
	if job.AttemptedAt != nil {
		wait = max(0, job.AttemptedAt.Sub(job.RunAt))
	}
	return timed{task: job.Task, at: o.attempt.At, wait: wait, ran: o.ran,
		failed: o.d.act != actComplete, dead: o.d.act == actDeadLetter}
}

// pruneTimingsEvery is how often a worker deletes the summaries past
// their keeping: a range of an index, usually empty, so every worker
// does it without taking turns.
const pruneTimingsEvery = time.Minute

// timingsLoop flushes the timings every TimingsInterval, and prunes the
// stored ones every pruneTimingsEvery, until ctx ends. Run flushes once
// more after the last outcomes are written.
func (w *Worker) timingsLoop(ctx context.Context) {
	flush := time.NewTicker(w.cfg.TimingsInterval)
	defer flush.Stop()
	prune := time.NewTicker(pruneTimingsEvery)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-flush.C:
			w.flushTimings(ctx)
		case <-prune.C:
			if _, err := w.store.PruneTimings(ctx, w.cfg.NowFunc()); err != nil && ctx.Err() == nil {
				w.noteFailure(err)
				w.log.Warn("pruning task timings failed; trying again later", "err", err)
			}
		}
	}
}

// flushTimings writes what was counted since the last flush, with one
// statement; on failure the counts wait for the next flush.
func (w *Worker) flushTimings(ctx context.Context) {
	rows := w.timings.take()
	if len(rows) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := w.store.AddTimings(wctx, rows); err != nil {
		w.noteFailure(err)
		w.timings.putBack(rows, w.cfg.NowFunc())
		w.log.Warn("writing task timings failed; trying again at the next flush", "rows", len(rows), "err", err)
	}
}
