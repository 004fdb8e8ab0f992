package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Timeouts of the worker's own bookkeeping writes. They run on contexts
// detached from Run's (context.WithoutCancel) so that shutdown cannot cut
// off the write that records or hands back a job; these bound them instead.
const (
	writeTimeout    = 10 * time.Second
	handBackTimeout = 5 * time.Second
	// abandonAfter is how long a handler whose context was cancelled (its
	// timeout, a lost lease, shutdown) may take to return before the
	// worker gives up on it and records the attempt without it. A handler
	// honouring its context returns in milliseconds; one that does not
	// would otherwise hold its job for ever, or block shutdown past the
	// orchestrator's SIGKILL.
	abandonAfter = 2 * time.Second
	// rescueBatch bounds one rescue transaction; the rescuer loops while
	// batches come back full.
	rescueBatch = 500
)

// The causes a running job's context is cancelled with.
var (
	errShutdown  = errors.New("worker shutting down: shutdown grace elapsed")
	errLeaseLost = errors.New("lease lost: another worker took over the job")
)

// Worker claims jobs from Postgres and runs them. Create one with New and
// start it with Run.
type Worker struct {
	metrics *metrics
	store   *dlq.Store
	cfg     Config
	tasks   map[string]task
	// taskNames lists tasks, sorted, for the workers row and error messages.
	taskNames []string
	host      string
	log       *slog.Logger

	started atomic.Bool
	// wake tells the claim loop that new work may be due (a notification, a
	// rescue); slotFreed that a running job finished. Both hold at most one
	// pending signal: several wake-ups before the loop runs mean one claim.
	wake      chan struct{}
	slotFreed chan struct{}

	mu sync.Mutex
	// active holds one entry per claim, keyed by its lease: after a stall
	// this worker may claim a job again while the stale run of the same
	// job is still winding down, and the two must not share an entry.
	active map[dlq.Lease]*activeJob
	jobs   sync.WaitGroup
}

// activeJob is a claimed job whose handler is running or whose outcome is
// being written.
type activeJob struct {
	job    dlq.Job
	cancel context.CancelCauseFunc
	// finished is set once the handler has returned: the heartbeat stops
	// renewing the lease, and a lease that then vanishes is not "lost" but
	// released by the outcome write.
	finished atomic.Bool
}

// New returns a worker over store. It validates cfg after filling defaults.
func New(store *dlq.Store, cfg Config) (*Worker, error) {
	if store == nil {
		return nil, errors.New("worker: store is required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	tasks := cfg.Registry.snapshot()
	m, err := newMetrics(cfg.Metrics)
	if err != nil {
		return nil, err
	}
	return &Worker{
		metrics:   m,
		store:     store,
		cfg:       cfg,
		tasks:     tasks,
		taskNames: slices.Sorted(maps.Keys(tasks)),
		host:      hostname(),
		log:       cfg.Logger.With("worker", cfg.ID),
		wake:      make(chan struct{}, 1),
		slotFreed: make(chan struct{}, 1),
		active:    map[dlq.Lease]*activeJob{},
	}, nil
}

// ID returns the worker's id, as recorded in leases and attempts.
func (w *Worker) ID() string { return w.cfg.ID }

// Run registers the worker, then claims and runs jobs until ctx is
// cancelled; then it shuts down as the package doc describes and returns.
// It returns an error if the worker could not start, or if shutdown left
// something undone. Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	if err := w.register(ctx); err != nil {
		return err
	}
	w.log.Info("worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency,
		"tasks", len(w.tasks), "version", w.cfg.Version, "listen", w.cfg.ListenDSN != "")

	// Jobs and heartbeats outlive ctx: they stop on their own schedule
	// during shutdown, so they hang off a context ctx cannot cancel.
	detached := context.WithoutCancel(ctx)
	jobsCtx, stopJobs := context.WithCancelCause(detached)
	defer stopJobs(nil)
	heartbeatCtx, stopHeartbeat := context.WithCancel(detached)
	defer stopHeartbeat()

	var loops sync.WaitGroup
	loops.Go(func() { w.heartbeatLoop(heartbeatCtx) })
	loops.Go(func() { w.rescueLoop(ctx) })
	if w.cfg.ListenDSN != "" {
		loops.Go(func() { w.listen(ctx) })
	}
	w.claimLoop(ctx, jobsCtx)

	w.log.Info("worker stopping: no new claims", "in_flight", w.inFlight(), "grace", w.cfg.ShutdownGrace)
	err := w.drain(detached, stopJobs)
	stopHeartbeat()
	loops.Wait()
	err = errors.Join(err, w.unregister(detached))
	w.log.Info("worker stopped")
	return err
}

func (w *Worker) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := w.store.RegisterWorker(ctx, dlq.WorkerInfo{
		ID: w.cfg.ID, Host: w.host, PID: os.Getpid(), Version: w.cfg.Version,
		Queues: w.cfg.Queues, Tasks: w.taskNames, Concurrency: w.cfg.Concurrency,
	})
	if err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	return nil
}

func (w *Worker) unregister(detached context.Context) error {
	ctx, cancel := context.WithTimeout(detached, writeTimeout)
	defer cancel()
	if err := w.store.UnregisterWorker(ctx, w.cfg.ID); err != nil {
		return fmt.Errorf("worker: stop: %w", err)
	}
	return nil
}

// drain waits for in-flight jobs through the grace period, then cancels
// them, and finally hands back the jobs of handlers that ignored the
// cancellation.
func (w *Worker) drain(detached context.Context, stopJobs context.CancelCauseFunc) error {
	done := make(chan struct{})
	go func() {
		w.jobs.Wait()
		close(done)
	}()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	}
	w.log.Warn("shutdown grace elapsed: cancelling unfinished jobs", "jobs", w.inFlight())
	stopJobs(errShutdown)
	// Each job abandons a handler that ignores the cancellation after
	// abandonAfter and hands its job back itself; this is the backstop
	// for a job whose recording then hangs.
	abandon := time.NewTimer(abandonAfter + handBackTimeout)
	defer abandon.Stop()
	select {
	case <-done:
		return nil
	case <-abandon.C:
	}
	return w.handBackAbandoned(detached)
}

// handBackAbandoned returns to the queue the jobs whose handlers are still
// running after cancellation. When such a handler finally returns, its
// outcome write matches no row (the lease is gone) and is discarded.
func (w *Worker) handBackAbandoned(detached context.Context) error {
	w.mu.Lock()
	var stuck []dlq.Job
	for _, a := range w.active {
		if !a.finished.Load() {
			stuck = append(stuck, a.job)
		}
	}
	w.mu.Unlock()
	if len(stuck) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(detached, handBackTimeout)
	defer cancel()
	var errs []error
	ids := make([]int64, 0, len(stuck))
	for _, job := range stuck {
		ids = append(ids, job.ID)
		a := w.interruptedAttempt(&job, w.cfg.NowFunc(), "its handler ignored cancellation and was abandoned")
		if _, err := w.store.HandBack(ctx, dlq.LeaseOf(w.cfg.ID, job), a); err != nil {
			errs = append(errs, err)
		}
	}
	w.log.Error("abandoned handlers that ignored cancellation; their jobs were handed back", "jobs", ids)
	errs = append(errs, fmt.Errorf("worker: %d handlers ignored cancellation and were abandoned (jobs %v)", len(ids), ids))
	return errors.Join(errs...)
}

// inFlight counts claimed jobs not yet fully recorded: the slots in use.
func (w *Worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

// runningLeases lists the claims whose handlers have not returned: the
// leases this worker must keep renewing.
func (w *Worker) runningLeases() []dlq.Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	held := make([]dlq.Lease, 0, len(w.active))
	for l, a := range w.active {
		if !a.finished.Load() {
			held = append(held, l)
		}
	}
	return held
}

// signal leaves a pending wake-up on ch without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
