package worker_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

func TestShutdown(t *testing.T) {
	t.Parallel()

	t.Run("InFlightJobFinishesWithinGrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		started, release := make(chan struct{}), make(chan struct{})
		sawCancel := make(chan bool, 1)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			close(started)
			select {
			case <-release:
				sawCancel <- false
				return nil
			case <-ctx.Done():
				sawCancel <- true
				return ctx.Err()
			}
		}, worker.TaskOptions{})
		r := b.start(t, b.config("w-grace"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		<-started
		r.cancel()
		close(release)
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if <-sawCancel {
			t.Fatal("the handler's context was cancelled inside the grace period")
		}
		if j := b.job(t, id); j.State != dlq.StateSucceeded {
			t.Fatalf("job %s, want succeeded", j.State)
		}
		var n int
		if err := b.db.Get(&n, `SELECT count(*) FROM workers`); err != nil || n != 0 {
			t.Fatalf("worker row not removed on clean stop: %d (%v)", n, err)
		}
	})

	t.Run("JobOutlivingGraceIsHandedBackAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			<-ctx.Done()
			return ctx.Err()
		}, worker.TaskOptions{})
		cfg := b.config("w-handback")
		cfg.LeaseDuration, cfg.ShutdownGrace = 30*time.Second, 300*time.Millisecond
		r := b.start(t, cfg)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		b.waitJob(t, id, dlq.StateRunning, 5*time.Second)

		// A second worker that only hears of work through LISTEN (its poll
		// is a minute away) and whose first claim found the job taken.
		next := *b
		next.reg = worker.NewRegistry()
		ran := make(chan int, 1)
		next.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			ran <- job.Attempt
			return nil
		}, worker.TaskOptions{})
		ncfg := next.config("w-next")
		ncfg.PollInterval, ncfg.ListenDSN = time.Minute, b.db.DSN
		next.start(t, ncfg)
		b.waitListening(t) // the second worker's: the first has none

		stopped := time.Now()
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(stopped); took < cfg.ShutdownGrace || took > cfg.ShutdownGrace+3*time.Second {
			t.Fatalf("Run returned %s after cancel, want just after the %s grace", took, cfg.ShutdownGrace)
		}
		var handedBack dlq.Job
		if err := b.db.Get(&handedBack, `SELECT errors FROM jobs WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		last, _ := handedBack.Errors.Last()
		if last.Outcome != dlq.OutcomeInterrupted || last.Class != "Interrupted" || last.Worker != "w-handback" {
			t.Fatalf("hand-back not recorded: %+v", handedBack.Errors)
		}
		// The hand-back gave the attempt back and woke the other worker:
		// it runs the job at once, as its first attempt, long before the
		// 30s lease would have expired.
		select {
		case attempt := <-ran:
			if attempt != 1 {
				t.Fatalf("the interrupted attempt was counted: second worker ran attempt %d", attempt)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("handed-back job not picked up: %+v", b.job(t, id))
		}
		j := b.waitJob(t, id, dlq.StateSucceeded, 5*time.Second)
		if j.Attempt != 1 || j.LeaseOwner != nil {
			t.Fatalf("job %+v", j)
		}
	})

	t.Run("HandlerIgnoringCancellationIsAbandonedAndItsJobHandedBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		release := make(chan struct{})
		returned := make(chan struct{})
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			defer close(returned)
			<-release // ignores ctx, as a badly written handler does
			return nil
		}, worker.TaskOptions{})
		cfg := b.config("w-stubborn")
		cfg.ShutdownGrace = 100 * time.Millisecond
		r := b.start(t, cfg)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		b.waitJob(t, id, dlq.StateRunning, 5*time.Second)
		stopped := time.Now()
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		// Grace, then abandonAfter (2 s) for the handler to honour the
		// cancellation: shutdown is bounded even by a handler that never
		// returns.
		if took := time.Since(stopped); took > 5*time.Second {
			t.Fatalf("shutdown took %s", took)
		}
		j := b.job(t, id)
		if j.State != dlq.StateAvailable || j.LeaseOwner != nil || j.Attempt != 0 {
			t.Fatalf("abandoned job not handed back with its attempt refunded: %+v", j)
		}
		if !strings.Contains(b.logs.String(), "handler ignored cancellation and was abandoned") {
			t.Fatal("the abandoned handler was not logged")
		}
		// When the handler finally returns, nothing it says is recorded:
		// the job is no longer this worker's.
		close(release)
		<-returned
		waitFor(t, 10*time.Second, "the late outcome to be dropped", func() bool { return r.drops.Load() == 1 })
		if j := b.job(t, id); j.State != dlq.StateAvailable {
			t.Fatalf("late outcome overwrote the handed-back job: %s", j.State)
		}
	})

	t.Run("HandlerIgnoringItsTimeoutIsAbandonedAndTheJobMovesOn", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			<-release // a read without a deadline: the timeout cannot stop it
			return nil
		}, worker.TaskOptions{Timeout: 100 * time.Millisecond})
		b.start(t, b.config("w-hung"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
		// Not held in running for ever by its heartbeat: dead-lettered,
		// exhausted, a couple of seconds after its timeout.
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)
		dls := b.deadLetters(t, id)
		if len(dls) != 1 || dls[0].Reason != dlq.ReasonExhausted || dls[0].ErrorClass != "Timeout" ||
			!strings.Contains(dls[0].ErrorMessage, "ignored cancellation") {
			t.Fatalf("letter: %+v", dls)
		}
	})

	t.Run("RunTwiceRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		r := b.start(t, b.config("w-twice"))
		waitFor(t, 5*time.Second, "the worker to register", func() bool {
			var n int
			return b.db.Get(&n, `SELECT count(*) FROM workers`) == nil && n == 1
		})
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // should the second Run start anyway, it stops at once
		if err := r.w.Run(ctx); err == nil {
			t.Fatal("second Run should fail")
		}
	})
}

// A worker stopped before it has started (a deploy that cancels at once)
// stops: Run returns the context's error, not the driver's words for the
// query it cancelled.
func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("test.task", func(context.Context, *worker.Job) error { return nil }, worker.TaskOptions{})
	w, err := worker.New(b.store.Queue, b.config("w-stopped-early"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run on a cancelled context: %v, want context.Canceled", err)
	}
}

func TestLeases(t *testing.T) {
	t.Parallel()

	t.Run("HeartbeatKeepsALongJobLeased", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			select {
			case <-time.After(2400 * time.Millisecond): // three leases long
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, worker.TaskOptions{})
		cfg := b.config("w-long")
		cfg.LeaseDuration, cfg.HeartbeatInterval = 800*time.Millisecond, 150*time.Millisecond
		b.start(t, cfg)
		// A second worker rescues eagerly: it would steal the job if the
		// heartbeat let the lease lapse.
		rescuer := b.config("w-rescuer")
		rescuer.Queues = []string{"elsewhere"}
		b.start(t, rescuer)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
		if j.Attempt != 1 || len(j.Errors) != 0 {
			t.Fatalf("the lease lapsed mid-job: attempt %d, history %+v", j.Attempt, j.Errors)
		}
		// The worker's own row is kept alive by the same heartbeat.
		if n := b.count(t, `SELECT count(*) FROM workers WHERE id = 'w-long' AND heartbeat_at > started_at`); n != 1 {
			t.Fatal("the workers row was not heartbeated")
		}
	})

	t.Run("ReclaimingItsOwnRescuedJobStopsTheStaleRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var runs atomic.Int32
		firstStarted, firstStopped, releaseFirst := make(chan struct{}), make(chan error, 1), make(chan struct{})
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			if runs.Add(1) == 1 {
				close(firstStarted)
				select {
				case <-ctx.Done():
					firstStopped <- context.Cause(ctx)
				case <-releaseFirst:
					firstStopped <- nil
				}
				return errors.New("stale run failed")
			}
			return nil
		}, worker.TaskOptions{})
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 5})
		b.start(t, b.config("w-stall"))
		<-firstStarted
		// What a rescue does once this worker has stalled past its lease:
		// the job goes back to the queue, and this same worker claims it
		// again while its first run is still going.
		if _, err := b.db.Exec(`UPDATE jobs SET state = 'retrying', run_at = now(), lease_owner = NULL,
			lease_expires_at = NULL WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
		select {
		case cause := <-firstStopped:
			if cause == nil {
				t.Fatal("the stale run was not cancelled")
			}
		case <-time.After(5 * time.Second):
			close(releaseFirst)
			t.Fatal("the stale run was not cancelled when the job was claimed again")
		}
		// The stale run tries to record its failure, and its outcome is
		// discarded: its lease is the new claim's.
		waitFor(t, 5*time.Second, "the stale run's outcome to be discarded", func() bool {
			return strings.Contains(b.logs.String(), "outcome discarded")
		})
		j = b.job(t, id)
		if j.State != dlq.StateSucceeded || j.Attempt != 2 {
			t.Fatalf("job %s at attempt %d, want succeeded on attempt 2", j.State, j.Attempt)
		}
		for _, a := range j.Errors {
			if strings.Contains(a.Message, "stale run") {
				t.Fatalf("the stale run's outcome was recorded over the new one: %+v", j.Errors)
			}
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2", n)
		}
	})

	t.Run("AForgottenWorkerRegistersAgainAtItsNextHeartbeat", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		cfg := b.config("w-forgotten")
		cfg.LeaseDuration, cfg.HeartbeatInterval = time.Second, 100*time.Millisecond
		b.start(t, cfg)
		waitFor(t, 5*time.Second, "the worker's row", func() bool {
			return b.count(t, `SELECT count(*) FROM workers WHERE id = 'w-forgotten'`) == 1
		})
		// As ForgetVanishedWorkers does to a worker silent for an hour (a
		// network partition, say) that is in fact still alive.
		if _, err := b.db.Exec(`DELETE FROM workers WHERE id = 'w-forgotten'`); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the worker to register again", func() bool {
			return b.count(t, `SELECT count(*) FROM workers WHERE id = 'w-forgotten' AND cardinality(tasks) = 1`) == 1
		})
	})

	t.Run("LostLeaseCancelsTheHandlerAndRecordsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cause := make(chan error, 1)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}, worker.TaskOptions{})
		b.start(t, b.config("w-stalled"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		b.waitJob(t, id, dlq.StateRunning, 5*time.Second)
		// What a rescue followed by another worker's claim looks like.
		if _, err := b.db.Exec(`UPDATE jobs SET lease_owner = 'w-other', lease_expires_at = now() + interval '1 hour' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-cause:
			if err == nil || !strings.Contains(err.Error(), "lease lost") {
				t.Fatalf("handler cancelled with %v, want lease lost", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("handler not cancelled after its lease was lost")
		}
		waitFor(t, 5*time.Second, "the outcome to be dropped", func() bool {
			return strings.Contains(b.logs.String(), "outcome discarded")
		})
		if j := b.job(t, id); j.State != dlq.StateRunning || *j.LeaseOwner != "w-other" || len(j.Errors) != 0 {
			t.Fatalf("the worker wrote over a job it no longer owns: %+v", j)
		}
	})
}

func TestListenNotify(t *testing.T) {
	t.Parallel()

	t.Run("EnqueueWakesAnIdleWorkerWithoutPolling", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		cfg := b.config("w-listen")
		cfg.PollInterval = time.Minute
		cfg.ListenDSN = b.db.DSN
		b.start(t, cfg)
		// Enqueue only once LISTEN has run: a job enqueued before it would
		// wait for the next poll, a minute away, and the test would race.
		b.waitListening(t)
		// After the warm job the queue is idle and the worker's startup
		// claim is long done: from here only a notification (or a poll, a
		// minute away) can start the next job.
		warm := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		b.waitJob(t, warm, dlq.StateSucceeded, 5*time.Second)
		enqueued := time.Now()
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		// Seconds at most, on a loaded machine; never the minute of a poll.
		b.waitJob(t, id, dlq.StateSucceeded, 5*time.Second)
		t.Logf("picked up %s after enqueue", time.Since(enqueued))
	})

	// A job enqueued after the worker's first claim but before its LISTEN
	// took hold notified nobody. Once LISTEN is up the worker looks once,
	// so the job does not wait a poll interval (a minute here). It used to.
	t.Run("AJobEnqueuedBeforeListenTookHoldIsNotLeftForThePoll", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		u, err := url.Parse(b.db.DSN)
		if err != nil {
			t.Fatal(err)
		}
		proxy := startCutProxy(t, u.Host)
		proxy.cut() // the LISTEN connection cannot be made yet
		cfg := b.config("w-listen-late")
		cfg.PollInterval = time.Minute
		cfg.ListenDSN = proxy.dsn(t, b.db.DSN)
		r := b.start(t, cfg)
		// After the worker's first claim, which looks at start: from then
		// on only LISTEN, or a poll a minute away, makes it look again.
		waitFor(t, 5*time.Second, "the worker's first claim", func() bool { return r.claims.Load() >= 1 })
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"}) // its NOTIFY reaches no one
		proxy.restore()
		b.waitJob(t, id, dlq.StateSucceeded, 15*time.Second)
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	store := storetest.NewStores(nil)

	t.Run("DefaultIDIsHostPidRandom", func(t *testing.T) {
		t.Parallel()
		reg := worker.NewRegistry()
		reg.Register("a.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		w, err := worker.New(store.Queue, worker.Config{Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		if parts := strings.Split(w.ID(), "-"); len(parts) < 3 {
			t.Fatalf("id %q", w.ID())
		}
	})

	t.Run("InvalidConfigListsEveryProblem", func(t *testing.T) {
		t.Parallel()
		_, err := worker.New(store.Queue, worker.Config{
			Queues: []string{"has space"}, Concurrency: -1,
			LeaseDuration: time.Second, HeartbeatInterval: time.Second,
		})
		for _, want := range []string{"Registry", "queue", "Concurrency", "HeartbeatInterval"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v does not mention %s", err, want)
			}
		}
	})

	t.Run("HeartbeatSlowerThanTheConsoleWaitsIsRefused", func(t *testing.T) {
		t.Parallel()
		reg := worker.NewRegistry()
		reg.Register("a.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		_, err := worker.New(store.Queue, worker.Config{Registry: reg, LeaseDuration: time.Hour, HeartbeatInterval: 10 * time.Minute})
		if err == nil || !strings.Contains(err.Error(), "stale between beats") {
			t.Fatalf("err %v, want the heartbeat refused", err)
		}
		// A long lease alone is fine: the default heartbeat stays short.
		if _, err := worker.New(store.Queue, worker.Config{Registry: reg, LeaseDuration: time.Hour}); err != nil {
			t.Fatalf("a one-hour lease with the default heartbeat: %v", err)
		}
	})

	t.Run("EmptyRegistryRefused", func(t *testing.T) {
		t.Parallel()
		_, err := worker.New(store.Queue, worker.Config{Registry: worker.NewRegistry()})
		if err == nil || !strings.Contains(err.Error(), "no tasks") {
			t.Fatalf("a worker without handlers would dead-letter everything; got %v", err)
		}
	})

	t.Run("NilStoreRefused", func(t *testing.T) {
		t.Parallel()
		if _, err := worker.New(nil, worker.Config{Registry: worker.NewRegistry()}); err == nil {
			t.Fatal("want an error")
		}
	})

	t.Run("RegistryPanicsOnDuplicates", func(t *testing.T) {
		t.Parallel()
		reg := worker.NewRegistry()
		h := func(ctx context.Context, job *worker.Job) error { return nil }
		reg.Register("a.task", h, worker.TaskOptions{})
		defer func() {
			if recover() == nil {
				t.Fatal("want a panic")
			}
		}()
		reg.Register("a.task", h, worker.TaskOptions{})
	})
}
