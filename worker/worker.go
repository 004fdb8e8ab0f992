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
	"github.com/redrive/redrive/store/queue"
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
	// maxGaveUp bounds the claims remembered in Worker.gaveUp. Past it the
	// oldest are forgotten, and orphans are looked for only among claims
	// made after them (Worker.orphansSince): a job that ran is still
	// never handed back, and an orphan of an older claim waits for the
	// rescuer instead, which spends its attempt (at least once holds).
	// Outcomes are given up when the database refuses them for their data
	// or when shutdown's last window closes, and forgotten once the
	// rescuer has taken their jobs: this many is far past a normal day.
	maxGaveUp = 10_000
)

// The causes a running job's context is cancelled with.
var (
	errShutdown  = errors.New("worker shutting down: shutdown grace elapsed")
	errLeaseLost = errors.New("lease lost: another worker took over the job")
)

// Worker claims jobs from Postgres and runs them. Create one with New and
// start it with Run.
type Worker struct {
	// signals tell tests of the loops' passes (testSignals).
	signals testSignals
	metrics *metrics
	store   *queue.Store
	cfg     Config
	tasks   map[string]task
	// taskNames lists tasks, sorted, for the workers row and error messages.
	taskNames []string
	// schedules are the registry's schedules, owned by the scheduler loop
	// once Run has registered them.
	schedules []*scheduleRun
	host      string
	log       *slog.Logger

	started atomic.Bool
	// wake tells the claim loop that new work may be due (a notification, a
	// rescue); slotFreed that a running job finished. Both hold at most one
	// pending signal: several wake-ups before the loop runs mean one claim.
	wake      chan struct{}
	slotFreed chan struct{}

	// grants are the worker's shares of the open throttles; the claim
	// loop's alone.
	grants throttleGrants

	// completer writes outcomes in batches.
	completer *completer
	// timings counts the written outcomes per task until timingsLoop
	// flushes them.
	timings *timings
	// since is when this process registered, by the database's clock: the
	// claims it can have made are no older.
	since time.Time
	// claiming is held while a claim runs and its jobs join the active
	// set, and while orphans are handed back: a job claimed but not yet in
	// the active set must not be taken for an orphan.
	claiming sync.Mutex
	// lostDatabaseAt is when this process last failed to reach the
	// database (Unix nanoseconds; zero for never). The rescuer waits
	// RestartGrace past it: every live worker's leases lapsed in the same
	// outage, and their owners renew them at their next heartbeat.
	lostDatabaseAt atomic.Int64

	mu sync.Mutex
	// active holds one entry per claim until its outcome is written, keyed
	// by its lease: after a stall this worker may claim a job again while
	// the stale run of the same job is still winding down, and the two
	// must not share an entry. A claim whose handler has returned stays
	// until its outcome is written or found superseded, however long the
	// database is away and whether or not its lease ran out meanwhile; the
	// claim loop's back-pressure (maxWaitingOutcomes) bounds them.
	active map[dlq.Lease]*activeJob
	// gaveUp holds the claims whose handlers ran but whose outcomes the
	// worker gave up writing (abandon), with when each was claimed by the
	// database's clock. They are left to the rescuer, which spends their
	// attempt once their leases run out. Meanwhile the hand-back of
	// orphaned claims must not take them for claims whose reply was lost:
	// it would record a job that ran as never run, give its attempt back
	// and run it again. An entry goes once its job no longer runs under
	// its claim (forgetSettled), or past maxGaveUp.
	gaveUp map[dlq.Lease]gaveUpClaim
	// load counts the claims of the active set and of gaveUp by task and
	// by queue, against the worker's throttle grants.
	load jobLoad
	// orphansSince is the oldest claim the hand-back of orphans considers:
	// since, moved past the claims forgotten from gaveUp at maxGaveUp.
	orphansSince time.Time
	// running counts the active claims whose handlers have not returned:
	// the slots in use. The others wait for the completer.
	running int
	// jobsStopped is the cause stopJobs cancelled every job with, nil
	// until then: a job claimed after it is cancelled as it starts.
	jobsStopped error
	jobs        sync.WaitGroup
	// idle hands a claimed job to a runner waiting for one (dispatch);
	// runners counts the runners, and stopRunners, closed as Run returns,
	// ends the idle ones.
	idle        chan jobRun
	runners     sync.WaitGroup
	stopRunners chan struct{}
}

// gaveUpClaim is a claim in Worker.gaveUp: when it was claimed, by the
// database's clock, and its job's task and queue (it counts in load).
type gaveUpClaim struct {
	at          time.Time
	task, queue string
}

// activeJob is a claimed job whose handler is running or whose outcome is
// being written.
type activeJob struct {
	job    dlq.Job
	cancel context.CancelCauseFunc
	// The parts of one attempt that live as long as the claim, held here
	// so that a job costs one allocation for them, not four: the copy of
	// the job its handler gets (a handler may change its copy; the worker
	// keeps its own), its logger, and the cause its deadline cancels it
	// with.
	handed   dlq.Job
	log      jobLog
	deadline timeoutError
	// finished is set once the handler has returned: a lease that then
	// vanishes is not "lost" but released by the outcome write, and there
	// is no handler left to cancel.
	finished atomic.Bool
}

// testSignals tell a test that a loop made a pass, so that it waits for
// passes instead of sleeping to show that something does not happen (a
// job on a paused queue is not claimed, a late outcome is not written).
// Set only by tests (export_test.go); nil in production.
type testSignals struct {
	// claimed: a claim ran, whatever it took.
	claimed func()
	// rescued: a rescue pass ended.
	rescued func()
	// dropped: an abandoned handler returned, and what it returned was
	// dropped.
	dropped func()
	// cleaned: a cleaner pass ended, or the cleaner found retention off
	// and will make none.
	cleaned func()
}

// tell calls f when it is set.
func tell(f func()) {
	if f != nil {
		f()
	}
}

// New returns a worker over store. It validates cfg after filling defaults.
func New(store *queue.Store, cfg Config) (*Worker, error) {
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
	w := &Worker{
		metrics:     m,
		store:       store,
		cfg:         cfg,
		tasks:       tasks,
		taskNames:   slices.Sorted(maps.Keys(tasks)),
		host:        hostname(),
		log:         cfg.Logger.With("worker", cfg.ID),
		wake:        make(chan struct{}, 1),
		slotFreed:   make(chan struct{}, 1),
		active:      map[dlq.Lease]*activeJob{},
		gaveUp:      map[dlq.Lease]gaveUpClaim{},
		idle:        make(chan jobRun),
		stopRunners: make(chan struct{}),
		timings:     newTimings(),
	}
	for _, s := range cfg.Registry.scheduleSnapshot() {
		w.schedules = append(w.schedules, &scheduleRun{registeredSchedule: s})
	}
	w.completer = newCompleter(w)
	return w, nil
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
	err := w.register(ctx)
	if err == nil {
		err = w.registerSchedules(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			// Stopped before it started: the driver reports the cancelled
			// query as its own error, but this is a stop, not a failure.
			return ctx.Err()
		}
		return err
	}
	w.log.Info("worker started", "queues", w.cfg.Queues, "concurrency", w.cfg.Concurrency,
		"tasks", len(w.tasks), "schedules", len(w.schedules), "version", w.cfg.Version, "listen", w.cfg.ListenDSN != "")

	// Jobs and heartbeats outlive ctx: they stop on their own schedule
	// during shutdown, so they hang off a context ctx cannot cancel.
	detached := context.WithoutCancel(ctx)
	defer w.stopJobs(nil)
	heartbeatCtx, stopHeartbeat := context.WithCancel(detached)
	defer stopHeartbeat()
	stopCompleter := make(chan struct{})
	var completer sync.WaitGroup
	completer.Go(func() { w.completer.run(detached, stopCompleter) })

	var loops sync.WaitGroup
	loops.Go(func() { w.heartbeatLoop(heartbeatCtx) })
	loops.Go(func() { w.rescueLoop(ctx) })
	loops.Go(func() { w.cleanerLoop(ctx) })
	if len(w.schedules) > 0 {
		loops.Go(func() { w.scheduleLoop(ctx) })
	}
	loops.Go(func() { w.timingsLoop(ctx) })
	if w.cfg.ListenDSN != "" {
		loops.Go(func() { w.listen(ctx) })
	} else {
		w.log.Info("no LISTEN connection (ListenDSN is empty): new jobs are found by polling", "every", w.cfg.PollInterval)
	}
	w.claimLoop(ctx, detached)
	w.dropGrants(detached)

	w.log.Info("worker stopping: no new claims", "in_flight", w.inFlight(), "grace", w.cfg.ShutdownGrace)
	err = w.drain(detached)
	// The last outcomes are written while the heartbeat still renews
	// their leases.
	close(stopCompleter)
	completer.Wait()
	// The last outcomes' timings, which the loop, stopped with ctx, left;
	// bounded as a hand-back is, so that a database away at shutdown
	// costs the timings, not the orchestrator's patience.
	flushCtx, cancelFlush := context.WithTimeout(detached, handBackTimeout)
	w.flushTimings(flushCtx)
	cancelFlush()
	stopHeartbeat()
	loops.Wait()
	close(w.stopRunners)
	w.runners.Wait()
	err = errors.Join(err, w.unregister(detached))
	w.log.Info("worker stopped")
	return err
}

func (w *Worker) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if w.since.IsZero() {
		now, err := w.store.Now(ctx)
		if err != nil {
			return fmt.Errorf("worker: start: %w", err)
		}
		w.since = now
		w.mu.Lock()
		w.orphansSince = now
		w.mu.Unlock()
	}
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
func (w *Worker) drain(detached context.Context) error {
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
	w.stopJobs(errShutdown)
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

// stopJobs cancels the context of every job running now with cause
// (context.Canceled when nil), and of every job started from now on.
//
// The jobs' contexts do not hang off one parent that could be cancelled
// instead: each job's context would then join and leave that parent's
// set of children, one map under one lock for every job of the worker
// (mapassign and mapdelete, with the lock, were 8 % of the worker's CPU
// in a drain of no-op jobs by pprof).
func (w *Worker) stopJobs(cause error) {
	if cause == nil {
		cause = context.Canceled
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.jobsStopped == nil {
		w.jobsStopped = cause
	}
	for _, a := range w.active {
		a.cancel(cause)
	}
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

// inFlight counts claimed jobs whose outcomes are not yet written.
func (w *Worker) inFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

// freeSlots is how many jobs the worker may claim now: the slots whose
// handlers are not running, less what the outcome backlog allows. A
// completer that falls behind (a slow or unreachable database) thus stops
// the claiming instead of piling up outcomes and leases.
func (w *Worker) freeSlots() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	waiting := len(w.active) - w.running
	return max(0, min(w.cfg.Concurrency-w.running, w.maxWaitingOutcomes()-waiting))
}

// maxWaitingOutcomes bounds the outcomes waiting to be written.
func (w *Worker) maxWaitingOutcomes() int {
	return max(w.cfg.Concurrency, maxOutcomeBatch)
}

// handlerReturned frees the slot of a claim whose handler has returned;
// its outcome may still be waiting for the completer.
func (w *Worker) handlerReturned(a *activeJob) {
	a.finished.Store(true)
	w.mu.Lock()
	w.running--
	w.mu.Unlock()
	signal(w.slotFreed)
}

// release forgets claims whose outcomes were written or given up on.
func (w *Worker) release(leases ...dlq.Lease) {
	w.mu.Lock()
	for _, l := range leases {
		if a := w.active[l]; a != nil {
			w.load.add(a.job.Task, a.job.Queue, -1)
			delete(w.active, l)
		}
	}
	w.mu.Unlock()
	signal(w.slotFreed)
}

// giveUp moves a claim whose outcome could not be written from the active
// set to gaveUp; its lease is left to expire. claimedAt is when it was
// claimed (the job's attempted_at).
func (w *Worker) giveUp(l dlq.Lease, claimedAt *time.Time) {
	w.mu.Lock()
	g := gaveUpClaim{at: w.since}
	if claimedAt != nil {
		g.at = *claimedAt
	}
	// Its job still runs in the database, under this worker's id, until
	// the rescuer takes it: it keeps counting against the grants.
	if a := w.active[l]; a != nil {
		g.task, g.queue = a.job.Task, a.job.Queue
		delete(w.active, l)
	}
	w.gaveUp[l] = g
	if len(w.gaveUp) > maxGaveUp {
		w.forgetOldestGaveUp()
	}
	w.mu.Unlock()
	signal(w.slotFreed)
}

// forgetOldestGaveUp forgets the oldest claims in gaveUp, those of its
// oldest claim statement, and moves orphansSince past them, so that the
// hand-back of orphans never sees them. w.mu must be held.
func (w *Worker) forgetOldestGaveUp() {
	oldest := time.Time{}
	for _, g := range w.gaveUp {
		if oldest.IsZero() || g.at.Before(oldest) {
			oldest = g.at
		}
	}
	// Postgres keeps microseconds: this is the next instant it can tell
	// apart. The claims of one statement share their attempted_at.
	w.orphansSince = oldest.Add(time.Microsecond)
	for l, g := range w.gaveUp {
		if g.at.Before(w.orphansSince) {
			w.forgetGaveUp(l)
		}
	}
	w.log.Warn("too many given-up outcomes to remember; orphaned claims older than the oldest kept are left to the rescuer",
		"max", maxGaveUp, "orphans_since", w.orphansSince)
}

// claims lists the leases of the active set and of gaveUp, and the oldest
// claim the hand-back of orphans considers, all at one instant.
func (w *Worker) claims() (active, gaveUp []dlq.Lease, orphansSince time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	active = make([]dlq.Lease, 0, len(w.active))
	for l := range w.active {
		active = append(active, l)
	}
	gaveUp = make([]dlq.Lease, 0, len(w.gaveUp))
	for l := range w.gaveUp {
		gaveUp = append(gaveUp, l)
	}
	return active, gaveUp, w.orphansSince
}

// forgetSettled forgets the claims among gaveUp (as listed by claims)
// whose jobs are not among running, the jobs the database had running
// under this worker's id, claimed since orphansSince, outside the active
// set: the rescuer (or an operator) has taken them, and they cannot come
// back to this claim.
func (w *Worker) forgetSettled(gaveUp []dlq.Lease, running []int64) {
	if len(gaveUp) == 0 {
		return
	}
	still := make(map[int64]bool, len(running))
	for _, id := range running {
		still[id] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range gaveUp {
		if !still[l.JobID] {
			w.forgetGaveUp(l)
		}
	}
}

// forgetGaveUp forgets one claim of gaveUp; w.mu must be held.
func (w *Worker) forgetGaveUp(l dlq.Lease) {
	if g, ok := w.gaveUp[l]; ok {
		if g.queue != "" { // it counted: it came from the active set
			w.load.add(g.task, g.queue, -1)
		}
		delete(w.gaveUp, l)
	}
}

// heldLeases lists every claim not yet released, running or waiting for its
// outcome to be written: the leases this worker must keep renewing.
func (w *Worker) heldLeases() []dlq.Lease {
	w.mu.Lock()
	defer w.mu.Unlock()
	held := make([]dlq.Lease, 0, len(w.active))
	for l := range w.active {
		held = append(held, l)
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

// noteFailure records when a database call failed because the database
// could not be reached; other failures say nothing about reachability.
func (w *Worker) noteFailure(err error) {
	if dlq.IsUnavailable(err) {
		w.lostDatabaseAt.Store(time.Now().UnixNano())
	}
}

// lostDatabaseWithin reports whether this process failed to reach the
// database within the last d.
func (w *Worker) lostDatabaseWithin(d time.Duration) bool {
	at := w.lostDatabaseAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < d
}
