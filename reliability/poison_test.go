package reliability

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestPoison runs the jobs that hurt workers: one that panics, one that
// outlives its timeout, one that ignores cancellation, and one whose
// process dies at every pick-up. Each ends as a dead letter after exactly
// max_attempts, and none holds a slot for ever: a job enqueued after them
// on the same one-slot worker still runs.
func TestPoison(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	setupEffects(t, db.DB)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	const maxAttempts = 3
	copies := size(1, 3)
	f := newFleet(t, db.DSN, childOpts{Concurrency: 1, Lease: time.Second, Grace: time.Second})
	// The suicidal task on a queue and a worker of its own, which the
	// driver restarts whenever it dies.
	f.setQueues("poison-killed", []string{"poison-kill"})
	f.setQueues("poison-w1", []string{"default"})
	f.start("poison-w1")
	f.start("poison-killed")

	want := map[int64]struct {
		task   string
		reason dlq.Reason
	}{}
	start := time.Now()
	for range copies {
		for _, task := range []string{taskPanic, taskOverrun, taskIgnoreCancel, taskKill} {
			queue := "default"
			reason := dlq.ReasonExhausted
			if task == taskKill {
				queue, reason = "poison-kill", dlq.ReasonLeaseExpired
			}
			res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: queue, MaxAttempts: maxAttempts})
			if err != nil {
				t.Fatal(err)
			}
			want[res.Job.ID] = struct {
				task   string
				reason dlq.Reason
			}{task, reason}
		}
	}
	after, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: taskNoop, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	restarts := 0
	waitFor(t, size(2*time.Minute, 5*time.Minute), "every poison job to be dead-lettered", func() bool {
		if done, _ := f.exited("poison-killed"); done {
			f.start("poison-killed")
			restarts++
		}
		return count(db.DB, `SELECT count(*) FROM jobs WHERE state <> 'dead' AND task <> $1`, taskNoop) == 0
	})
	took := time.Since(start)
	for id, w := range want {
		var l struct {
			Reason   dlq.Reason
			Attempts int
			N        int
		}
		err := db.Get(&l, `SELECT min(reason) AS reason, min(attempts) AS attempts, count(*) AS n FROM dead_letters WHERE job_id = $1`, id)
		if err != nil {
			t.Fatal(err)
		}
		if l.N != 1 || l.Reason != w.reason || l.Attempts != maxAttempts {
			t.Errorf("%s (job %d): %d letters, reason %q after %d attempts; want one, %q after %d",
				w.task, id, l.N, l.Reason, l.Attempts, w.reason, maxAttempts)
		}
	}
	waitFor(t, 30*time.Second, "the job enqueued after the poison to run on the one-slot worker", func() bool {
		j, err := store.Queue.Job(ctx, after.Job.ID)
		return err == nil && j.State == dlq.StateSucceeded
	})
	if done, err := f.exited("poison-w1"); done {
		t.Errorf("the worker running panics, timeouts and deaf handlers died: %v", err)
	}
	if t.Failed() {
		return
	}
	figures(t, "poison", "%d poison jobs (panic, timeout, ignores cancellation, kills its worker) dead-lettered after %d attempts each in %s, %d worker deaths; the slot was free again afterwards",
		len(want), maxAttempts, took.Round(time.Second), restarts)
}
