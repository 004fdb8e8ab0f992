package worker_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// pauseTask pauses task through the store, as the console and the API do.
func (b *bundle) pause(t *testing.T, kind, name string, until *time.Time) dlq.Pause {
	t.Helper()
	res, err := b.store.Queue.PauseWork(context.Background(), dlq.PauseParams{Kind: kind, Name: name, Reason: "provider down",
		Until: until, Actor: dlq.Actor{Name: "alice"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Pause
}

// countingTask registers name with a handler that counts its runs.
func (b *bundle) countingTask(name string) *atomic.Int64 {
	var runs atomic.Int64
	b.reg.Register(name, func(ctx context.Context, job *worker.Job) error {
		runs.Add(1)
		return nil
	}, worker.TaskOptions{})
	return &runs
}

func TestPause(t *testing.T) {
	t.Parallel()

	// A paused task's jobs stay available, attempts untouched, while the
	// other tasks of the same queue run; the resume's NOTIFY releases them
	// at once, though the worker polls only every minute. The pause is
	// in place before the worker starts, which must honour it too.
	t.Run("PausedTaskWaitsWhileOthersRunAndResumeReleasesAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		held := b.countingTask("test.task")
		b.countingTask("test.sleep")
		cfg := b.config("w-pause")
		cfg.PollInterval, cfg.ListenDSN = time.Minute, b.db.DSN
		p := b.pause(t, dlq.PauseTask, "test.task", nil)
		b.start(t, cfg)

		var paused []int64
		for range 5 {
			paused = append(paused, b.enqueue(t, dlq.EnqueueParams{Task: "test.task"}))
		}
		other := b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep"})
		b.waitJob(t, other, dlq.StateSucceeded, 5*time.Second)
		// The other job ran after the paused ones were enqueued, on the
		// same queue: the worker claimed past them.
		for _, id := range paused {
			if j := b.job(t, id); j.State != dlq.StateAvailable || j.Attempt != 0 {
				t.Fatalf("paused job %d is %s at attempt %d, want available at attempt 0", id, j.State, j.Attempt)
			}
		}
		if n := held.Load(); n != 0 {
			t.Fatalf("the paused task ran %d times", n)
		}

		start := time.Now()
		if _, err := b.store.Queue.ResumeWork(context.Background(), dlq.ResumeParams{ID: p.ID, Actor: dlq.Actor{Name: "bob"}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		for _, id := range paused {
			b.waitJob(t, id, dlq.StateSucceeded, 5*time.Second)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("resume released the jobs after %s; the NOTIFY should beat the minute-long poll by far", took)
		}
		t.Logf("resume to the last held job done: %s (poll interval %s)", time.Since(start), cfg.PollInterval)
		if n := b.count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Fatalf("%d jobs dead-lettered because of a pause", n)
		}
		for _, id := range paused {
			if j := b.job(t, id); j.Attempt != 1 {
				t.Fatalf("job %d ran at attempt %d, want 1: the pause must not use attempts", id, j.Attempt)
			}
		}
	})

	// A paused queue holds every task on it; other queues keep flowing.
	t.Run("PausedQueueWaitsWhileOtherQueuesRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		runs := b.countingTask("test.task")
		cfg := b.config("w-queue")
		cfg.Queues = []string{"default", "payments"}
		p := b.pause(t, dlq.PauseQueue, "payments", nil)
		r := b.start(t, cfg)
		held := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Queue: "payments"})
		other := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Queue: "default"})
		b.waitJob(t, other, dlq.StateSucceeded, 5*time.Second)
		r.await(t, &r.claims, 5, "five claims that must not take it")
		if j := b.job(t, held); j.State != dlq.StateAvailable || j.Attempt != 0 {
			t.Fatalf("job on the paused queue is %s at attempt %d, want available at 0", j.State, j.Attempt)
		}
		if _, err := b.store.Queue.ResumeWork(context.Background(), dlq.ResumeParams{ID: p.ID, Actor: dlq.Actor{Name: "bob"}, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		b.waitJob(t, held, dlq.StateSucceeded, 5*time.Second)
		if runs.Load() != 2 {
			t.Fatalf("%d runs, want 2", runs.Load())
		}
	})

	// A pause with an expiry ends by itself: the claim stops honouring it
	// when its time is up, and a worker records the expiry once.
	t.Run("ExpiryResumesByItself", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.countingTask("test.task")
		until := time.Now().Add(1500 * time.Millisecond)
		p := b.pause(t, dlq.PauseTask, "test.task", &until)
		r := b.start(t, b.config("w-expiry"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		r.await(t, &r.claims, 3, "three claims before the pause expires")
		if j := b.job(t, id); j.State != dlq.StateAvailable {
			t.Fatalf("job is %s before the pause expired, want available", j.State)
		}
		j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
		if j.AttemptedAt == nil || j.AttemptedAt.Before(until) {
			t.Fatalf("job ran at %v, before the pause's until %v", j.AttemptedAt, until)
		}
		waitFor(t, 5*time.Second, "the expiry's audit entry", func() bool {
			return b.count(t, `SELECT count(*) FROM audit_events WHERE action = 'pause_expired'`) == 1
		})
		got, err := b.store.Queue.PauseByID(context.Background(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Expired || got.ResumedAt == nil || got.ResumedBy == nil || *got.ResumedBy != dlq.ExpiryActor {
			t.Fatalf("pause after expiry: %+v, want expired, resumed by %q", got, dlq.ExpiryActor)
		}
		// Every worker's rescue tries again; none writes a second entry.
		r.await(t, &r.rescues, 3, "three more rescue passes")
		if n := b.count(t, `SELECT count(*) FROM audit_events WHERE action = 'pause_expired'`); n != 1 {
			t.Fatalf("%d expiry entries, want exactly 1", n)
		}
	})

	// Jobs already running when a pause begins finish normally.
	t.Run("RunningJobFinishesAfterPause", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		started, release := make(chan struct{}), make(chan struct{})
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			close(started)
			<-release
			return nil
		}, worker.TaskOptions{})
		b.start(t, b.config("w-running"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		<-started
		b.pause(t, dlq.PauseTask, "test.task", nil)
		close(release)
		if j := b.waitJob(t, id, dlq.StateSucceeded, 5*time.Second); j.Attempt != 1 {
			t.Fatalf("attempt %d, want 1", j.Attempt)
		}
	})
}
