package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestTimingsAreSummarisedPerTask runs jobs that succeed, fail and die,
// some of them due a while before a worker starts, and checks what the
// task page reads: each outcome counted once, the wait and run times in
// the right buckets, written as one minute row and one hour row per task
// however many jobs ran.
func TestTimingsAreSummarisedPerTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.reg.Register("test.task", func(ctx context.Context, j *worker.Job) error {
		if string(j.Args) == `["fail"]` {
			return worker.Permanent(errors.New("boom"))
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	}, worker.TaskOptions{})
	b.reg.Register("test.sleep", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
	// Due a minute ago: each waits at least that long once the worker starts.
	due := time.Now().Add(-time.Minute)
	var ids []int64
	for range 6 {
		ids = append(ids, b.enqueue(t, dlq.EnqueueParams{Task: "test.task", RunAt: due}))
	}
	ids = append(ids, b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Args: []byte(`["fail"]`), RunAt: due}))
	for range 3 {
		ids = append(ids, b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep"}))
	}
	cfg := b.config("timings-1")
	cfg.TimingsInterval = time.Hour // only the flush at shutdown
	r := b.start(t, cfg)
	for _, id := range ids {
		waitFor(t, 10*time.Second, "every job to finish", func() bool {
			s := b.job(t, id).State
			return s == dlq.StateSucceeded || s == dlq.StateDead
		})
	}
	if n := b.count(t, `SELECT count(*) FROM task_timings`); n != 0 {
		t.Fatalf("%d summaries written before the first flush; want them counted in memory", n)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// One row per task and span; a job that ran across a minute's end
	// would make two, so allow them.
	if n := b.count(t, `SELECT count(*) FROM task_timings WHERE span = 'hour'`); n < 2 || n > 4 {
		t.Errorf("%d hour rows, want one per task", n)
	}
	all, err := b.store.Queue.Timings(ctx, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Task != "test.sleep" || all[1].Task != "test.task" {
		t.Fatalf("timings of %+v, want test.sleep and test.task", all)
	}
	for i, w := range dlq.TimingWindows() {
		s := all[1].Windows[i]
		if s.Runs != 7 || s.Failures != 1 || s.Dead != 1 {
			t.Errorf("%s: %d runs, %d failures, %d dead; want 7, 1, 1", w.Name, s.Runs, s.Failures, s.Dead)
		}
		if p50, _ := s.Wait.Quantile(0.5); p50 < 50*time.Second || p50 > 2*time.Minute {
			t.Errorf("%s: median wait %s, want about a minute", w.Name, p50)
		}
		if p99, _ := s.Run.Quantile(0.99); p99 < 18*time.Millisecond || p99 > time.Second {
			t.Errorf("%s: p99 run time %s, want about 20 ms", w.Name, p99)
		}
		if s := all[0].Windows[i]; s.Runs != 3 || s.Failures != 0 {
			t.Errorf("%s: test.sleep %d runs, %d failures; want 3, 0", w.Name, s.Runs, s.Failures)
		}
	}

	// A second worker's flush adds to the same rows.
	b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep"})
	r2 := b.start(t, cfg)
	waitFor(t, 10*time.Second, "the job to run", func() bool {
		return b.count(t, `SELECT count(*) FROM jobs WHERE task = 'test.sleep' AND state = 'succeeded'`) == 4
	})
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	one, err := b.store.Queue.Timings(ctx, "test.sleep", time.Now())
	if err != nil || len(one) != 1 || one[0].Windows[2].Runs != 4 {
		t.Fatalf("test.sleep over 14 days: %+v (%v); want 4 runs", one, err)
	}

	// Pruning keeps what the windows read.
	b.db.MustExec(`INSERT INTO task_timings (task, span, start_at, runs, failures, dead, wait, run) VALUES
		('old', 'minute', now() - interval '3 hours', 1, 0, 0, '{1}', '{1}'),
		('old', 'hour', now() - interval '16 days', 1, 0, 0, '{1}', '{1}')`)
	if n, err := b.store.Queue.PruneTimings(ctx, time.Now()); err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want the 2 old rows", n, err)
	}
}
