package worker

import (
	"context"
	"slices"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Claim batching. A claim is one round trip and one transaction however
// many rows it takes, so the loop prefers to claim many jobs at once: it
// claims as soon as topUp slots are free, and claims fewer only once
// claimCooldown has passed since the last claim, so that a slot freed now
// and then (long jobs) still gets work within a few milliseconds while a
// worker of short jobs does not claim one job per round trip.
const (
	claimCooldown = 5 * time.Millisecond
	// maxClaimBatch caps one claim: a claim of thousands of rows holds
	// their locks, and the rows' index pages, for longer than the jobs
	// need to start.
	maxClaimBatch = 1_000
	// throttleRetry is how soon a worker claims again after a short claim
	// while a throttle is open: the throttled work left waiting gets a
	// slot when a job of it finishes on any worker, and a token as time
	// passes, neither of which wakes anyone.
	throttleRetry = 50 * time.Millisecond
)

// topUp is how many free slots are worth a claim at once.
func (w *Worker) topUp() int {
	return max(1, min(w.cfg.Concurrency/4, maxClaimBatch/2))
}

// claimLoop claims jobs while there are free slots and work may be due, and
// otherwise waits for a reason to look again: a notification, a freed slot,
// a rescue, or the poll tick. It returns as soon as ctx is cancelled.
func (w *Worker) claimLoop(ctx, jobsCtx context.Context) {
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	cooldown := time.NewTimer(claimCooldown)
	defer cooldown.Stop()
	throttled := time.NewTimer(throttleRetry)
	throttled.Stop() // armed by a short claim while a throttle is open
	defer throttled.Stop()
	// Claim at once on start: work may have piled up while no worker ran.
	mayHaveWork := true
	var lastClaim time.Time
	var cursor claimCursor
	for {
		if ctx.Err() != nil {
			return
		}
		if free := w.freeSlots(); mayHaveWork && free > 0 {
			if wait := claimCooldown - time.Since(lastClaim); free >= w.topUp() || wait <= 0 {
				limit := min(free, maxClaimBatch)
				from := cursor.next(time.Now(), w.cfg.PollInterval)
				c, err := w.claim(jobsCtx, from, limit)
				jobs := c.Jobs
				lastClaim = time.Now()
				cursor.advance(lastClaim, from, c, limit, err != nil)
				if err == nil && c.Throttled && len(jobs) < limit {
					throttled.Reset(throttleRetry)
				}
				// A full batch suggests more is waiting: claim again as soon
				// as slots free. A short one from the head means the queues
				// are drained for now, and a freed slot alone is no reason to
				// ask again; a short one after positions is followed by a
				// claim from the head, for what the walk skipped, unless a
				// throttle was open: then throttleRetry asks again, after
				// the same positions (claimCursor). One that found a
				// throttle without a grant is followed at once by a claim
				// with one, unless renewing is failing.
				mayHaveWork = err == nil && (len(jobs) == limit || from != nil && !c.Throttled ||
					c.Ungranted && w.grants.due(time.Now()))
				if mayHaveWork {
					continue
				}
			} else {
				cooldown.Reset(wait)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			mayHaveWork = true
		case <-w.slotFreed:
		case <-cooldown.C:
		case <-throttled.C:
			mayHaveWork = true
		case <-poll.C:
			mayHaveWork = true
		}
	}
}

// claim takes up to limit jobs, each queue's after its position in from
// (nil: from the head), within the worker's throttle grants (renewed
// first when due), and starts them. The claim runs on a context
// that shutdown does not cancel: a claim cancelled mid-flight can commit
// without our seeing its rows, stranding those jobs until their leases
// expire and burning an attempt of each.
func (w *Worker) claim(jobsCtx context.Context, from map[string]dlq.Position, limit int) (dlq.Claim, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(jobsCtx), writeTimeout)
	defer cancel()
	w.claiming.Lock()
	w.renewGrants(ctx)
	rooms := w.grants.rooms(time.Now(), w.runningOf)
	c, err := w.store.ClaimGranted(ctx, w.cfg.ID, w.cfg.Queues, from, limit, w.cfg.LeaseDuration, rooms)
	w.start(jobsCtx, c.Jobs)
	w.grants.spend(c.Jobs)
	w.grants.stale = w.grants.stale || c.Ungranted
	w.claiming.Unlock()
	defer tell(w.signals.claimed)
	if err != nil {
		w.noteFailure(err)
		w.log.Warn("claim failed; retrying at the next poll", "err", err)
		// The claim may still commit, or have committed with its reply
		// lost: hand back whatever it took. The claim loop waits for the
		// next poll rather than being woken: a claim that fails every time
		// (the database down, a broken query) must not spin.
		w.handBackOrphans(jobsCtx)
		return dlq.Claim{}, err
	}
	if len(c.Jobs) > 0 {
		w.log.Debug("claimed jobs", "count", len(c.Jobs))
	}
	return c, nil
}

// start runs each claimed job on a runner (dispatch). The jobs are in the
// active set before start returns, so the claim loop's next count of free
// slots includes them; they join it under one lock, not one each. Their
// contexts derive from jobsCtx, which nothing cancels: stopJobs cancels
// each job's own.
func (w *Worker) start(jobsCtx context.Context, jobs []dlq.Job) {
	if len(jobs) == 0 {
		return
	}
	runs := make([]jobRun, len(jobs))
	for i, job := range jobs {
		ctx, cancel := context.WithCancelCause(jobsCtx)
		a := &activeJob{job: job, cancel: cancel}
		runs[i] = jobRun{ctx: ctx, cancel: cancel, a: a}
	}
	w.mu.Lock()
	for _, r := range runs {
		job := r.a.job
		lease := dlq.LeaseOf(w.cfg.ID, job)
		// An earlier claim of the same job by this worker can only have an
		// earlier attempt: look those up rather than scan every active claim.
		for attempt := 1; attempt < lease.Attempt; attempt++ {
			l := dlq.Lease{Worker: lease.Worker, JobID: job.ID, Attempt: attempt}
			if old := w.active[l]; old != nil && !old.finished.Load() {
				// This worker stalled past the old lease, the job was rescued,
				// and now it is ours again under a new one: the stale run
				// must stop (its writes would be refused anyway).
				w.log.Warn("lease lost; cancelling handler", "job_id", job.ID, "task", job.Task, "attempt", l.Attempt)
				old.cancel(errLeaseLost)
			}
		}
		w.active[lease] = r.a
		w.load.add(job.Task, job.Queue, 1)
		if w.jobsStopped != nil {
			r.a.cancel(w.jobsStopped)
		}
	}
	w.running += len(runs)
	w.mu.Unlock()
	w.jobs.Add(len(runs))
	for _, r := range runs {
		w.dispatch(r)
	}
}

// runnerIdle is how long a runner with no job waits for the next before it
// exits: long enough to carry it between claims under load, short enough
// that a burst's runners do not linger.
const runnerIdle = 5 * time.Second

// jobRun is a claimed job handed to a runner.
type jobRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	a      *activeJob
}

// dispatch runs r on an idle runner, or on a new one if none is idle.
//
// Runners outlive their jobs because a new goroutine's stack starts small
// and grows by copying as the handler's call chain deepens: with a
// goroutine per job that copying was 15% of the worker's CPU in a drain
// of no-op jobs (pprof: runtime.copystack under runHandler). A runner's
// stack grows once.
func (w *Worker) dispatch(r jobRun) {
	select {
	case w.idle <- r:
	default:
		w.runners.Add(1)
		go w.runner(r)
	}
}

// runner executes r, then every job handed to it, until it has been idle
// for runnerIdle or the worker stops. A runner whose handler is abandoned
// leaves the pool to the handler (its count was released then).
func (w *Worker) runner(r jobRun) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		if w.execute(r.ctx, r.cancel, r.a) {
			return
		}
		idle.Reset(runnerIdle)
		var ok bool
		if r, ok = w.awaitRun(idle.C); !ok {
			w.runners.Done()
			return
		}
	}
}

// runnerStackReserve is the stack a runner holds while it waits for its
// next job. The garbage collector halves the stack of a goroutine that
// uses less than a quarter of it, so a runner that waited in a shallow
// frame lost its stack at every GC cycle, and its next job grew it back by
// copying: runtime.copystack was 17 % of the worker's CPU in a burst of
// dead letters (whose failure path runs deeper than a success), 0.6 % with
// the reserve, and dead-lettering went from 7,458–8,183 to 8,570–9,648
// letters/s (make bench ONLY=dead-lettering, the two builds alternating).
// 4 KiB keeps stacks of up to 16 KiB whole.
const runnerStackReserve = 4 << 10

// awaitRun waits for the runner's next job until idle fires or the worker
// stops (false), in a frame that holds runnerStackReserve bytes.
//
//go:noinline
func (w *Worker) awaitRun(idle <-chan time.Time) (jobRun, bool) {
	var reserve [runnerStackReserve]byte
	holdStack(reserve[:])
	select {
	case r := <-w.idle:
		return r, true
	case <-idle:
	case <-w.stopRunners:
	}
	return jobRun{}, false
}

// holdStack touches b so that the compiler keeps the array behind it on
// the caller's stack.
//
//go:noinline
func holdStack(b []byte) { b[0] = 0 }

// heartbeatLoop renews the leases of running jobs and the worker's row
// until ctx is cancelled, which Run does only after every job has finished
// or been handed back.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(w.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.heartbeat(ctx)
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context) {
	// Past half the lease a heartbeat cannot reliably save the leases it
	// renews; give up and let the next tick try again.
	ctx, cancel := context.WithTimeout(ctx, w.cfg.LeaseDuration/2)
	defer cancel()
	held := w.heldLeases()
	if len(held) > 0 {
		renewed, err := w.store.ExtendLeases(ctx, w.cfg.ID, held, w.cfg.LeaseDuration)
		if err != nil {
			w.noteFailure(err)
			w.log.Warn("renew leases failed", "jobs", len(held), "err", err)
		} else {
			w.cancelLost(held, renewed)
			w.checkCancels(ctx, renewed)
		}
	}
	if w.handBackOrphans(ctx) > 0 {
		signal(w.wake) // they are due now
	}
	found, err := w.store.Heartbeat(ctx, w.cfg.ID, len(held))
	switch {
	case err != nil:
		w.noteFailure(err)
		w.log.Warn("worker heartbeat failed", "err", err)
	case !found:
		// Cut off from the database long enough to be forgotten: come
		// back, so the console lists this worker and its version again.
		if err := w.register(ctx); err != nil {
			w.log.Warn("register again after being forgotten failed", "err", err)
		} else {
			w.log.Warn("worker row was gone (forgotten after a long silence); registered again")
		}
	}
}

// handBackOrphans hands back the jobs the database says this worker holds
// but it does not know of: a claim that committed after the worker stopped
// waiting for it. Their handlers never ran; see dlq.HandBackOrphans.
// It returns how many it handed back.
//
// What the worker knows of is every claim in its active set, whose
// handler may have run however long ago its lease ran out, and every
// claim it gave up writing the outcome of (gaveUp): a job that ran is
// never handed back as unrun. The look also tells which given-up claims
// the rescuer has taken since, to forget them.
//
// It looks first without holding up claims (dlq.OrphanSuspects), because
// the look can take long under load, and there is almost never anything
// to find: holding claims off meanwhile stalled a busy worker for seconds
// at every heartbeat. A claim that commits while it looks makes suspects
// of jobs that are not orphans; the hand-back, with claims held off, tells
// them apart.
func (w *Worker) handBackOrphans(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handBackTimeout)
	defer cancel()
	active, gaveUp, since := w.claims()
	suspects, err := w.store.OrphanSuspects(ctx, w.cfg.ID, since, active)
	if err != nil {
		w.noteFailure(err)
		w.log.Warn("looking for orphaned claims failed; trying again at the next heartbeat", "err", err)
		return 0
	}
	w.forgetSettled(gaveUp, suspects)
	ran := make(map[int64]bool, len(gaveUp))
	for _, l := range gaveUp {
		ran[l.JobID] = true
	}
	suspects = slices.DeleteFunc(suspects, func(id int64) bool { return ran[id] })
	if len(suspects) == 0 {
		return 0
	}
	w.claiming.Lock()
	defer w.claiming.Unlock()
	a := dlq.Attempt{At: w.cfg.NowFunc(), Worker: w.cfg.ID, Host: w.host, Version: w.cfg.Version,
		Message: "the claim's reply never reached the worker (it timed out or its connection broke); the job was handed back unrun"}
	// Every claim this worker knows of, active or given up on, is not an
	// orphan: listed again, with claims held off, together with the
	// oldest claim that may be one.
	active, gaveUp, since = w.claims()
	orphans, err := w.store.HandBackOrphans(ctx, w.cfg.ID, since, append(active, gaveUp...), suspects, a)
	switch {
	case err != nil:
		w.noteFailure(err)
		w.log.Warn("handing back orphaned claims failed; trying again at the next heartbeat", "err", err)
	case len(orphans) > 0:
		w.log.Warn("handed back jobs claimed under this worker's id whose claim reply was lost", "jobs", orphans)
	}
	return len(orphans)
}

// cancelLost stops the handlers of claims whose leases were not renewed.
// Such a job was rescued after this worker stalled past its lease and is
// now another claim's; finishing it here would only duplicate effects, and
// its outcome could not be recorded anyway.
func (w *Worker) cancelLost(held, renewed []dlq.Lease) {
	if len(renewed) == len(held) {
		return
	}
	kept := make(map[dlq.Lease]bool, len(renewed))
	for _, l := range renewed {
		kept[l] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range held {
		a := w.active[l]
		if a == nil || a.finished.Load() || kept[l] {
			continue
		}
		w.log.Warn("lease lost; cancelling handler", "job_id", l.JobID, "task", a.job.Task, "attempt", l.Attempt)
		a.cancel(errLeaseLost)
	}
}

// rescueLoop returns jobs with expired leases to the queue (or to the dead
// letters, on their last attempt) until ctx is cancelled. Every worker runs
// it; SKIP LOCKED in the store keeps two from rescuing the same job.
func (w *Worker) rescueLoop(ctx context.Context) {
	tick := time.NewTicker(w.cfg.RescueInterval)
	defer tick.Stop()
	for {
		w.rescue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *Worker) rescue(ctx context.Context) {
	defer tell(w.signals.rescued)
	// Crashed workers never unregister; their rows go once long stale.
	if n, err := w.store.ForgetVanishedWorkers(ctx); err != nil {
		w.noteFailure(err)
		if ctx.Err() == nil {
			w.log.Warn("forget vanished workers failed", "err", err)
		}
	} else if n > 0 {
		w.log.Info("forgot workers that stopped heartbeating", "workers", n, "after", dlq.WorkerForgetAfter)
	}
	// Leases that lapsed while this process could not reach the database
	// lapsed for their live owners too, who renew them at their next
	// heartbeat once the database is back: taking them first would run a
	// healthy worker's job twice and record a crash that never happened.
	// The store applies the same rule to a Postgres restart, which a
	// worker polling between two failures may not have seen.
	if w.lostDatabaseWithin(w.cfg.RestartGrace) {
		return
	}
	w.expirePauses(ctx)
	w.expireThrottles(ctx)
	for {
		res, err := w.store.RescueExpired(ctx, rescueBatch, w.cfg.ID, w.cfg.NowFunc(), w.cfg.RestartGrace)
		if err != nil {
			w.noteFailure(err)
			if ctx.Err() == nil {
				w.log.Warn("lease rescue failed", "err", err)
			}
			return
		}
		if res.Requeued > 0 {
			signal(w.wake)
		}
		if res.Requeued+res.DeadLettered > 0 {
			w.log.Warn("rescued jobs with expired leases", "requeued", res.Requeued, "dead_lettered", res.DeadLettered)
		}
		if res.Requeued+res.DeadLettered < rescueBatch {
			return
		}
	}
}
