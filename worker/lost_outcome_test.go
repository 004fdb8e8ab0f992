package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// runCounter counts the runs of each job's handler.
type runCounter struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (c *runCounter) ran(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[int64]int{}
	}
	c.runs[id]++
}

func (c *runCounter) of(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// outageTask is test.outage, registered by registerOutageTask. Its
// handler counts its run and says it started; its first attempt then works
// until the test closes release, whatever the database does, and says it
// finished; then it fails (transiently) when kwargs.fail is set and
// succeeds otherwise.
type outageTask struct {
	runs     runCounter
	started  chan int64
	release  chan struct{}
	finished chan int64
}

func registerOutageTask(t *testing.T, reg *worker.Registry) *outageTask {
	o := &outageTask{started: make(chan int64, 8), release: make(chan struct{}), finished: make(chan int64, 8)}
	// A test that fails before releasing the handlers lets them return
	// at its end.
	t.Cleanup(o.releaseAll)
	reg.Register("test.outage", func(ctx context.Context, job *worker.Job) error {
		o.runs.ran(job.ID)
		var kw struct{ Fail bool }
		if err := json.Unmarshal(job.Kwargs, &kw); err != nil {
			return worker.Permanent(err)
		}
		o.started <- job.ID
		if job.Attempt == 1 {
			<-o.release
			o.finished <- job.ID
		}
		if kw.Fail {
			return errors.New("card declined")
		}
		return nil
	}, worker.TaskOptions{})
	return o
}

// releaseAll lets the first attempts finish their work.
func (o *outageTask) releaseAll() {
	select {
	case <-o.release:
	default:
		close(o.release)
	}
}

// await waits for n handlers to send on c: to start, or to finish.
func await(t *testing.T, c <-chan int64, n int, what string) {
	t.Helper()
	for range n {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatalf("the jobs did not %s", what)
		}
	}
}

// historyHas reports whether history holds an entry of attempt with outcome.
func historyHas(history dlq.Attempts, attempt int, outcome dlq.Outcome) bool {
	for _, a := range history {
		if a.Attempt == attempt && a.Outcome == outcome {
			return true
		}
	}
	return false
}

// TestAJobThatRanIsNeverHandedBackUnrun reproduces issue 28: handlers
// finish while Postgres is down for longer than their 3 s lease. The
// worker used to retry their outcomes while the lease lasted, then forget
// the claims, and once Postgres was back its hand-back of orphaned claims
// took them for claims whose reply was lost: "handed back unrun", the
// attempt refunded, and a max_attempts 1 job ran twice. Each outcome must
// be written once the database is back, the job run once per attempt.
func TestAJobThatRanIsNeverHandedBackUnrun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := storetest.NewPrivate(t)
	b := &bundle{db: pg.DB, store: storetest.NewStores(pg.DB.DB), reg: worker.NewRegistry(), logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker logs:\n%s", b.logs.String())
		}
	})
	if err := b.store.Queue.RegisterTasks(ctx, []string{"test.outage"}); err != nil {
		t.Fatal(err)
	}
	task := registerOutageTask(t, b.reg)
	runs := &task.runs
	cfg := b.config("outage-1")
	// The demo's lease; the default grace, so that the rescuer leaves the
	// lapsed leases to their worker after the restart, as in production.
	cfg.LeaseDuration, cfg.HeartbeatInterval, cfg.RestartGrace = 3*time.Second, time.Second, worker.DefaultRestartGrace
	b.start(t, cfg)

	succeeds := b.enqueue(t, dlq.EnqueueParams{Task: "test.outage", MaxAttempts: 1})
	fails := b.enqueue(t, dlq.EnqueueParams{Task: "test.outage", MaxAttempts: 2, Kwargs: kwargs(map[string]any{"fail": true})})
	await(t, task.started, 2, "start")
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// The handlers finish during the outage.
	task.releaseAll()
	await(t, task.finished, 2, "finish")
	// The outage lasts 7 s in all, past the 3 s leases. With the database
	// down there is no lapse to see, so the test waits the time out.
	time.Sleep(time.Until(stopped.Add(7 * time.Second))) // on purpose: the outage's length
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := pg.Restart(rctx); err != nil {
		t.Fatal(err)
	}

	j := b.waitJob(t, succeeds, dlq.StateSucceeded, 30*time.Second)
	if n := runs.of(succeeds); n != 1 || j.Attempt != 1 || len(j.Errors) != 0 {
		t.Errorf("the max_attempts 1 job that succeeded during the outage ran %d times and ended on attempt %d with history %+v; want one run, attempt 1, no history",
			n, j.Attempt, j.Errors)
	}
	j = b.waitJob(t, fails, dlq.StateDead, 30*time.Second)
	if n := runs.of(fails); n != 2 || j.Attempt != 2 || len(j.Errors) != 2 ||
		!historyHas(j.Errors, 1, dlq.OutcomeRetry) || !historyHas(j.Errors, 2, dlq.OutcomeDead) {
		t.Errorf("the max_attempts 2 job that failed during the outage ran %d times and ended on attempt %d with history %+v; want two runs: attempt 1 recorded as a retry, attempt 2 as dead",
			n, j.Attempt, j.Errors)
	}
}

// TestAnOutcomeAfterTheRescuerTookTheJob: a worker cut off from the
// database for longer than its lease finishes a job meanwhile, and the
// rescuer of a worker that still reaches the database takes the job
// before the outcome can be written. If nobody has claimed the job since,
// its worker takes it back and records the outcome. Otherwise the outcome
// is lost: the job's attempt stays counted (its max attempts hold), and
// its history must say that the attempt ran and its outcome was lost,
// rather than nothing.
func TestAnOutcomeAfterTheRescuerTookTheJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxAttempts int
		// rescued is the job's state once the rescuer has taken it, and
		// park whether nobody may claim it again before the owner is back.
		rescued dlq.State
		park    bool
		// the job's end: its state, attempt, how often it ran, and
		// whether the owner's outcome was lost
		state   dlq.State
		attempt int
		runs    int
		lost    bool
	}{
		{"TakenBackAndRecorded", 2, dlq.StateRetrying, true, dlq.StateSucceeded, 1, 1, false},
		{"RunAgainByAnotherWorker", 2, dlq.StateSucceeded, false, dlq.StateSucceeded, 2, 2, true},
		{"DeadLetteredByTheRescuer", 1, dlq.StateDead, false, dlq.StateDead, 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			if err := b.store.Queue.RegisterTasks(ctx, []string{"test.outage"}); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(b.db.DSN)
			if err != nil {
				t.Fatal(err)
			}
			proxy := startCutProxy(t, u.Host)
			cutDB, err := postgres.Open(ctx, proxy.dsn(t, b.db.DSN))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cutDB.Close() })
			task := registerOutageTask(t, b.reg)
			runs := &task.runs

			owner := b.config("lost-owner")
			owner.HeartbeatInterval, owner.RestartGrace = 500*time.Millisecond, 2*time.Second
			w, err := worker.New(storetest.NewStores(cutDB).Queue, owner)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- w.Run(rctx) }()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			id := b.enqueue(t, dlq.EnqueueParams{Task: "test.outage", MaxAttempts: tc.maxAttempts})
			await(t, task.started, 1, "start")
			// The other worker reaches the database directly: it rescues the
			// job once the owner's 2 s lease lapses, and runs it again if it
			// has an attempt left and is not parked.
			other := b.config("lost-other")
			if tc.park {
				other.Queues = []string{"elsewhere"}
			}
			o := b.start(t, other)
			waitFor(t, 10*time.Second, "the other worker's first rescue pass", func() bool { return o.rescues.Load() >= 1 })
			proxy.cut()
			// The job finishes while its worker is cut off.
			task.releaseAll()
			await(t, task.finished, 1, "finish")
			b.waitJob(t, id, tc.rescued, 15*time.Second)
			if tc.park {
				// Nobody may claim it before its owner is back: the owner
				// serves its queue too.
				b.db.MustExec(`UPDATE jobs SET run_at = now() + interval '1 hour' WHERE id = $1`, id)
			}
			proxy.restore()
			var j dlq.Job
			waitFor(t, 15*time.Second, "the owner's outcome to be settled", func() bool {
				j = b.job(t, id)
				return j.State == tc.state && (!tc.lost || historyHas(j.Errors, 1, dlq.OutcomeLost))
			})
			if n := runs.of(id); n != tc.runs || j.Attempt != tc.attempt {
				t.Errorf("job ran %d times and is %s on attempt %d; want %d runs, %s on attempt %d", n, j.State, j.Attempt,
					tc.runs, tc.state, tc.attempt)
			}
			if !historyHas(j.Errors, 1, dlq.OutcomeLeaseExpired) && !historyHas(j.Errors, 1, dlq.OutcomeDead) {
				t.Errorf("history %+v; want the rescue of attempt 1", j.Errors)
			}
			for _, a := range j.Errors {
				if a.Outcome == dlq.OutcomeLost && (!tc.lost || a.Worker != "lost-owner" || a.Class != dlq.OutcomeLostClass) {
					t.Errorf("lost outcome entry %+v; want the owner's, of class %s, and only where the outcome was lost", a, dlq.OutcomeLostClass)
				}
				if a.Outcome == dlq.OutcomeInterrupted {
					t.Errorf("history %+v hands the job back unrun; it ran", j.Errors)
				}
			}
		})
	}
}
