package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// childEnv makes the test binary run one worker instead of the tests: the
// process tests re-exec themselves to get a worker they can SIGKILL or
// SIGTERM. The other REDRIVE_CHILD_* variables configure it.
const childEnv = "REDRIVE_WORKER_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	code := storetest.Main(m)
	if code == 0 && !noLeakedGoroutines() {
		code = 1
	}
	os.Exit(code)
}

// runChild runs a worker against REDRIVE_CHILD_DSN until SIGTERM or SIGINT,
// the way `redrive worker` wires it (cli.RunWorker), logging to stderr for the parent to show.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	db, err := postgres.Open(ctx, os.Getenv("REDRIVE_CHILD_DSN"))
	if err != nil {
		logger.Error("child: open database", "err", err)
		return 2
	}
	defer db.Close()
	reg := worker.NewRegistry()
	registerTestTasks(reg)
	// The task that keeps killing its worker exists only in children: in
	// the test process it would kill the test run.
	reg.Register("test.kill_worker", func(ctx context.Context, job *worker.Job) error {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		<-ctx.Done()
		return ctx.Err()
	}, worker.TaskOptions{})
	ms := func(name string) time.Duration {
		n, _ := strconv.Atoi(os.Getenv(name))
		return time.Duration(n) * time.Millisecond
	}
	if every := ms("REDRIVE_CHILD_SCHEDULE_MS"); every > 0 {
		reg.Schedule(scheduleName, worker.Schedule{Every: every, Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 1})})
	}
	conc, _ := strconv.Atoi(os.Getenv("REDRIVE_CHILD_CONCURRENCY"))
	err = cli.RunWorker(ctx, db, worker.Config{
		Registry: reg, ID: os.Getenv("REDRIVE_CHILD_ID"), Concurrency: conc,
		LeaseDuration: ms("REDRIVE_CHILD_LEASE_MS"), HeartbeatInterval: ms("REDRIVE_CHILD_LEASE_MS") / 5,
		PollInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond, RestartGrace: time.Millisecond,
		ShutdownGrace: ms("REDRIVE_CHILD_GRACE_MS"), Logger: logger, Version: "child-test",
	})
	if err != nil {
		logger.Error("child: run", "err", err)
		return 1
	}
	return 0
}

// registerTestTasks adds the tasks both the children and the in-process
// workers of the process tests run.
func registerTestTasks(reg *worker.Registry) {
	// test.sleep sleeps kwargs.ms milliseconds, stopping early when its
	// context ends, as a well-behaved handler does.
	reg.Register("test.sleep", func(ctx context.Context, job *worker.Job) error {
		var kw struct{ MS int }
		if err := json.Unmarshal(job.Kwargs, &kw); err != nil {
			return worker.Permanent(err)
		}
		select {
		case <-time.After(time.Duration(kw.MS) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return fmt.Errorf("sleep interrupted: %w", ctx.Err())
		}
	}, worker.TaskOptions{})
	// test.hang_first_attempt never finishes its first attempt (until its
	// context ends) and succeeds on any later one: the shape of a job whose
	// worker died under it.
	reg.Register("test.hang_first_attempt", func(ctx context.Context, job *worker.Job) error {
		if job.Attempt == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}, worker.TaskOptions{})
}

var testTaskNames = []string{"test.sleep", "test.hang_first_attempt", "test.kill_worker", "test.task", "ghost.task"}

// noLeakedGoroutines checks, after every test has finished, that no
// goroutine of the worker package or of a lib/pq listener is left: Run must
// stop everything it starts.
func noLeakedGoroutines() bool {
	// Polled (no t here for storetest.WaitFor): goroutines may still be
	// finishing their last instructions.
	var stacks string
	deadline := time.Now().Add(3 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		if leaked(stacks) == "" {
			return true
		}
		<-tick.C
	}
	fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked(stacks))
	return false
}

func leaked(stacks string) string {
	var out []string
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "redrive/redrive/worker.") || strings.Contains(g, "redrive/redrive/worker/demo.") ||
			strings.Contains(g, "lib/pq.(*Listener") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// bundle is what most tests need: a private database, its store and a
// registry to fill.
type bundle struct {
	db    *storetest.DB
	store *storetest.Stores
	reg   *worker.Registry
	logs  *syncBuffer
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(context.Background(), testTaskNames); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker logs:\n%s", logs.String())
		}
	})
	return &bundle{db: db, store: store, reg: worker.NewRegistry(), logs: logs}
}

// config is a fast, deterministic worker configuration: short leases and
// polls, and retry delays without jitter (RandFunc returns 1).
func (b *bundle) config(id string) worker.Config {
	return worker.Config{
		Registry: b.reg, ID: id, Concurrency: 4,
		LeaseDuration: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond, RestartGrace: time.Millisecond,
		DefaultTimeout: 10 * time.Second, ShutdownGrace: 2 * time.Second,
		RetryPolicy: worker.RetryPolicy{Base: 10 * time.Millisecond, Cap: 40 * time.Millisecond, RandFunc: func() float64 { return 1 }},
		Logger:      slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", true),
		Version:     "test-1.2.3",
	}
}

// running is a worker started by start.
type running struct {
	w      *worker.Worker
	cancel context.CancelFunc
	done   chan error
	// claims, rescues, drops and cleans count the worker's passes (its
	// test signals): a test waits for some instead of sleeping.
	claims, rescues, drops, cleans atomic.Int64
}

// await waits until the counter c has grown by n from now: n more passes.
func (r *running) await(t *testing.T, c *atomic.Int64, n int64, what string) {
	t.Helper()
	until := c.Load() + n
	waitFor(t, 10*time.Second, what, func() bool { return c.Load() >= until })
}

// start runs a worker until the test ends or stop is called.
func (b *bundle) start(t *testing.T, cfg worker.Config) *running {
	t.Helper()
	w, err := worker.New(b.store.Queue, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, done: make(chan error, 1)}
	worker.SetSignals(w, worker.Signals{
		Claimed: func() { r.claims.Add(1) },
		Rescued: func() { r.rescues.Add(1) },
		Dropped: func() { r.drops.Add(1) },
		Cleaned: func() { r.cleans.Add(1) },
	})
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { _ = r.stop(t) })
	return r
}

// stop cancels the worker's context and waits for Run to return.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // later calls see the same result
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not stop within 30s")
		return nil
	}
}

func (b *bundle) enqueue(t *testing.T, p dlq.EnqueueParams) int64 {
	t.Helper()
	res, err := b.store.Queue.Enqueue(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (b *bundle) job(t *testing.T, id int64) dlq.Job {
	t.Helper()
	j, err := b.store.Queue.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitJob waits until job id reaches state and returns it.
func (b *bundle) waitJob(t *testing.T, id int64, state dlq.State, timeout time.Duration) dlq.Job {
	t.Helper()
	var j dlq.Job
	waitFor(t, timeout, fmt.Sprintf("job %d to be %s", id, state), func() bool {
		j = b.job(t, id)
		return j.State == state
	})
	return j
}

// deadLetters returns the dead letters of job id.
func (b *bundle) deadLetters(t *testing.T, jobID int64) []dlq.DeadLetter {
	t.Helper()
	var dls []dlq.DeadLetter
	err := b.db.Select(&dls, `SELECT id, job_id, queue, task, args, kwargs, idempotency_key, error_class,
		error_message, traceback, attempts, max_attempts, history, reason, fingerprint, worker_version,
		enqueued_at, failed_at, replay_of, replayed_at, replayed_by, replay_job_id, discarded_at,
		discarded_by, discard_reason, status
		FROM dead_letters WHERE job_id = $1`, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return dls
}

// count runs a count(*) query.
func (b *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	storetest.WaitFor(t, timeout, what, cond)
}

func kwargs(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
