package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Bounds of the batched outcome writer. One statement per kind of outcome
// per flush amortises the round trip, the commit and the summary triggers
// over the whole batch; the cap keeps one statement's arrays and its
// transaction small enough that a slow flush cannot hold row locks long.
const (
	maxOutcomeBatch = 2_000
	// deadLetterWriters batches of dead letters are written at once, each
	// on its own connection. A dead letter costs the database several
	// times a success (the job's update, a letter with its index entries,
	// the summary rows), so with one writer a burst of them is bound by
	// one backend, the other core idling through every commit's WAL flush
	// and round trip (make bench: 7,100 letters/s with one writer, 8,800
	// with two). Successes are cheap and touch neighbouring rows: two
	// writers of them only contend (16,000–18,000 jobs/s with one, 14,000–
	// 17,000 with two), so they keep one.
	deadLetterWriters = 2
	// Retries of a flush that failed for the connection's sake (not its
	// data) back off from retryFlushMin to retryFlushMax, until the flush
	// succeeds.
	retryFlushMin = 50 * time.Millisecond
	retryFlushMax = 2 * time.Second
	// finalFlushWindow bounds how long shutdown keeps retrying the last
	// outcomes: past it, the orchestrator's SIGKILL is near, and a job
	// whose success could not be written is redelivered when its lease
	// expires (at least once, the attempt spent).
	finalFlushWindow = 5 * time.Second
)

// outcome is the result of one attempt, waiting to be written.
type outcome struct {
	active  *activeJob
	lease   dlq.Lease
	d       decision
	attempt dlq.Attempt
	log     *jobLog
	// ran is how long the handler ran, by the worker's clock, for the
	// task's timings (dlq.Attempt keeps whole milliseconds only).
	ran time.Duration
	// retaken: the claim took its job back from the rescuer once already
	// (retake); it does not try again.
	retaken bool
}

// completer writes attempts' outcomes in batches, as River's batch
// completer does: handlers hand their outcome over and take the next job
// at once, and each kind of outcome (succeeded, retrying, dead) has its own
// lane, whose writers write whatever has accumulated with one statement.
// Under load a batch grows by itself to what arrived during the previous
// write, so writers never queue behind one another; when idle, an outcome
// is written at once. The lanes are independent, so a burst of costly dead
// letters never holds back the acknowledgement of jobs that succeeded.
//
// Until its outcome is written a job keeps its lease, which the heartbeat
// renews, so a database that goes away for a moment delays the write
// instead of handing the job to the rescuer. A write that fails for the
// connection's sake is retried with backoff until it succeeds, however
// long the outage: the lease may run out meanwhile, but the write is
// guarded by the claim (its worker and attempt), not by the lease's
// expiry, so it still lands if nobody has taken the job. If the rescuer
// requeued it and nobody has claimed it since, the claim takes it back
// and writes again (retake); if another claim has it, the job's history
// says that this attempt ran and its outcome was lost (recordLost). A
// write that fails for its data is split, so one bad row cannot hold back
// the others. The claims waiting for their outcomes are bounded: the
// worker stops claiming while maxWaitingOutcomes wait.
type completer struct {
	w     *Worker
	lanes map[action]*lane
}

// lane queues one kind of outcome for its writers.
type lane struct {
	write   writeFunc
	writers int
	mu      sync.Mutex
	pending []outcome
	// spares are the arrays of batches already written, for pending to
	// grow into again: a batch is taken whole (take), and without them
	// every batch's array was grown afresh by append, outcome by outcome
	// (an outcome is a few hundred bytes: a fifth of what the worker
	// allocated in a drain of no-op jobs, by pprof's alloc_space).
	spares [][]outcome
	wake   chan struct{}
}

func newCompleter(w *Worker) *completer {
	c := &completer{w: w}
	newLane := func(fn writeFunc, writers int) *lane {
		return &lane{write: fn, writers: writers, wake: make(chan struct{}, 1)}
	}
	c.lanes = map[action]*lane{
		actComplete:   newLane(c.writeCompleted, 1),
		actRetry:      newLane(c.writeRetries, 1),
		actDeadLetter: newLane(c.writeDead, deadLetterWriters),
	}
	return c
}

// add queues an outcome for writing.
func (c *completer) add(o outcome) {
	l := c.lanes[o.d.act]
	l.mu.Lock()
	l.pending = append(l.pending, o)
	l.mu.Unlock()
	signal(l.wake)
}

// take removes and returns up to max queued outcomes, oldest first. When
// they all fit, the batch is the queue itself, and the queue starts again
// in a spare array (recycle).
func (l *lane) take(max int) []outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) <= max {
		batch := l.pending
		l.pending = nil
		if n := len(l.spares); n > 0 {
			l.pending, l.spares = l.spares[n-1], l.spares[:n-1]
		}
		return batch
	}
	batch := make([]outcome, max)
	copy(batch, l.pending)
	l.pending = l.pending[max:]
	return batch
}

// maxSpareOutcomes bounds the arrays a lane keeps for reuse, so that a
// burst's large arrays are let go.
const maxSpareOutcomes = 2 * maxOutcomeBatch

// recycle gives the array of a written batch back to the lane. The
// outcomes are cleared first: they point to jobs that are done.
func (l *lane) recycle(batch []outcome) {
	if cap(batch) == 0 || cap(batch) > maxSpareOutcomes {
		return
	}
	clear(batch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.spares) < l.writers {
		l.spares = append(l.spares, batch[:0])
	}
}

// run writes outcomes as they arrive until stop is closed, then writes what
// is left and returns. From stop on, writes are retried for at most
// finalFlushWindow: the context of every write ends then, and what is
// still unwritten is given up (abandon).
func (c *completer) run(ctx context.Context, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	var window sync.WaitGroup
	window.Go(func() {
		select {
		case <-stop:
		case <-ctx.Done():
			return
		}
		t := time.NewTimer(finalFlushWindow)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-ctx.Done():
		}
	})
	var lanes sync.WaitGroup
	for _, l := range c.lanes {
		lanes.Go(func() { c.runLane(ctx, l, stop) })
	}
	lanes.Wait()
	cancel()
	window.Wait()
}

// runLane is run for one lane: up to l.writers batches are written at
// once; on stop it waits for the writes in flight, then writes what is
// left.
//
// A writer takes its batch only once it is free, so under load each batch
// is what arrived while the other writers were busy: batches grow with the
// load instead of one writer taking every outcome as it comes.
func (c *completer) runLane(ctx context.Context, l *lane, stop <-chan struct{}) {
	free := make(chan struct{}, l.writers)
	for range l.writers {
		free <- struct{}{}
	}
	var writing sync.WaitGroup
	finish := func() {
		writing.Wait()
		c.flushLane(ctx, l)
	}
	for {
		select {
		case <-l.wake:
		case <-stop:
			finish()
			return
		}
		for {
			select {
			case <-free:
			case <-stop:
				finish()
				return
			}
			batch := l.take(maxOutcomeBatch)
			if len(batch) == 0 {
				free <- struct{}{}
				break
			}
			writing.Go(func() {
				defer func() { free <- struct{}{} }()
				c.write(ctx, batch, l.write)
				l.recycle(batch)
			})
		}
	}
}

// flushLane writes every outcome queued in l, in batches of
// maxOutcomeBatch.
func (c *completer) flushLane(ctx context.Context, l *lane) {
	for {
		batch := l.take(maxOutcomeBatch)
		if len(batch) == 0 {
			return
		}
		c.write(ctx, batch, l.write)
	}
}

// writeFunc writes a batch of one kind and reports the job ids it wrote.
type writeFunc func(ctx context.Context, batch []outcome) (map[int64]int64, error)

// write runs fn until it succeeds or ctx ends (finalFlushWindow after
// shutdown began). A batch refused for its data is split in two and each
// half written on its own, down to single outcomes, so that only the row
// at fault is given up.
func (c *completer) write(ctx context.Context, batch []outcome, fn writeFunc) {
	if len(batch) == 0 {
		return
	}
	w := c.w
	backoff := retryFlushMin
	for {
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		written, err := fn(wctx, batch)
		cancel()
		if err == nil {
			c.settle(ctx, batch, written)
			return
		}
		if dlq.IsInputError(err) && len(batch) > 1 {
			half := len(batch) / 2
			c.write(ctx, batch[:half], fn)
			c.write(ctx, batch[half:], fn)
			return
		}
		// Refused for its data, no retry will write it; past the shutdown
		// window, no retry may.
		if dlq.IsInputError(err) || ctx.Err() != nil {
			for _, o := range batch {
				c.abandon(o, err)
			}
			return
		}
		w.noteFailure(err)
		w.log.Warn("writing job outcomes failed; retrying until the database takes them",
			"jobs", len(batch), "retry_in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			for _, o := range batch {
				c.abandon(o, err)
			}
			return
		}
		backoff = min(2*backoff, retryFlushMax)
	}
}

func (c *completer) writeCompleted(ctx context.Context, batch []outcome) (map[int64]int64, error) {
	leases := make([]dlq.Lease, len(batch))
	for i, o := range batch {
		leases[i] = o.lease
	}
	ids, err := c.w.store.CompleteMany(ctx, c.w.cfg.ID, leases)
	return idSet(ids), err
}

func (c *completer) writeRetries(ctx context.Context, batch []outcome) (map[int64]int64, error) {
	outs := make([]dlq.RetryOutcome, len(batch))
	for i, o := range batch {
		outs[i] = dlq.RetryOutcome{Lease: o.lease, Delay: o.d.delay, Attempt: o.attempt}
	}
	ids, err := c.w.store.RetryMany(ctx, c.w.cfg.ID, outs)
	return idSet(ids), err
}

func (c *completer) writeDead(ctx context.Context, batch []outcome) (map[int64]int64, error) {
	outs := make([]dlq.DeadOutcome, len(batch))
	for i, o := range batch {
		outs[i] = dlq.DeadOutcome{Lease: o.lease, Task: o.active.job.Task, Reason: o.d.reason, Attempt: o.attempt}
	}
	res, err := c.w.store.DeadLetterMany(ctx, c.w.cfg.ID, outs)
	letters := make(map[int64]int64, len(res))
	for _, r := range res {
		letters[r.JobID] = r.LetterID
	}
	return letters, err
}

func idSet(ids []int64) map[int64]int64 {
	set := make(map[int64]int64, len(ids))
	for _, id := range ids {
		set[id] = 0
	}
	return set
}

// settle reports each written outcome and releases its claim. An outcome
// missing from written had lost its claim: it is written again if the
// claim can take its job back (retake), and recorded as lost otherwise.
func (c *completer) settle(ctx context.Context, batch []outcome, written map[int64]int64) {
	m := &tally{m: c.w.metrics}
	defer m.flush()
	debug := c.w.log.Enabled(ctx, slog.LevelDebug)
	leases := make([]dlq.Lease, 0, len(batch))
	timed := make([]timed, 0, len(batch))
	var unwritten []outcome
	for _, o := range batch {
		job, a := o.active.job, o.attempt
		letter, ok := written[o.lease.JobID]
		if !ok {
			unwritten = append(unwritten, o)
			continue
		}
		leases = append(leases, o.lease)
		timed = append(timed, o.timed())
		switch o.d.act {
		case actComplete:
			m.observe(job.Task, job.Queue, outcomeSucceeded, a.DurationMS)
			if debug {
				o.log.get().Debug("job succeeded", "duration_ms", a.DurationMS)
			}
		case actRetry:
			m.observe(job.Task, job.Queue, outcomeRetried, a.DurationMS)
			o.log.get().Info("job failed; retrying", "class", a.Class, "err", a.Message, "retry_in", o.d.delay)
		case actDeadLetter:
			m.observe(job.Task, job.Queue, outcomeDead, a.DurationMS)
			o.log.get().Warn("job dead-lettered", "reason", o.d.reason, "class", a.Class, "err", a.Message, "dead_letter_id", letter)
		}
	}
	c.w.timings.add(timed)
	lost := c.retake(ctx, unwritten)
	c.recordLost(ctx, lost)
	for _, o := range lost {
		leases = append(leases, o.lease)
	}
	c.w.release(leases...)
}

// retake takes back the jobs of unwritten outcomes that the rescuer
// requeued from their claims (their leases ran out while the database
// was unreachable) and that nobody has claimed since, and queues those
// outcomes to be written again: a job whose handler ran ends with its
// real outcome rather than running again. It returns the others, whose
// outcomes are lost; if the take-back fails, it gives them all up
// (abandon) and returns none.
func (c *completer) retake(ctx context.Context, unwritten []outcome) (lost []outcome) {
	var leases []dlq.Lease
	for _, o := range unwritten {
		if !o.retaken {
			leases = append(leases, o.lease)
		}
	}
	if len(leases) == 0 {
		return unwritten
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	taken, err := c.w.store.ReclaimRescued(wctx, c.w.cfg.ID, leases, c.w.cfg.LeaseDuration)
	if err != nil {
		// The database is away again, most likely, and the take-back may
		// have committed unseen: the jobs are given up like any outcome
		// that cannot be written, remembered until the rescuer has them.
		c.w.noteFailure(err)
		for _, o := range unwritten {
			c.abandon(o, err)
		}
		return nil
	}
	back := make(map[dlq.Lease]bool, len(taken))
	for _, l := range taken {
		back[l] = true
	}
	for _, o := range unwritten {
		if back[o.lease] {
			o.log.get().Info("job taken back from the rescuer, which had requeued it; writing its outcome again")
			o.retaken = true
			c.add(o)
		} else {
			lost = append(lost, o)
		}
	}
	return lost
}

// recordLost says in the history of each job whose outcome could not be
// written that its attempt ran and what became of it (the store leaves
// out jobs whose outcome was in fact written). It is tried once: the
// note tells the operator what happened, while the job's fate is already
// settled by the claim that took it, the attempt counted.
func (c *completer) recordLost(ctx context.Context, lost []outcome) {
	if len(lost) == 0 {
		return
	}
	outs := make([]dlq.LostOutcome, len(lost))
	for i, o := range lost {
		a := o.attempt
		a.Message = "the handler ran and " + ranTo(o) + ", but the rescuer had taken the job before its outcome could be " +
			"recorded (the lease ran out first: the worker could not reach the database, or stalled); the attempt counts"
		outs[i] = dlq.LostOutcome{Lease: o.lease, Attempt: a}
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	noted, err := c.w.store.RecordLostOutcomes(wctx, c.w.cfg.ID, outs)
	if err != nil {
		c.w.noteFailure(err)
		c.w.log.Error("recording lost job outcomes in their histories failed", "jobs", len(lost), "err", err)
	}
	said := make(map[int64]bool, len(noted))
	for _, id := range noted {
		said[id] = true
	}
	for _, o := range lost {
		if said[o.lease.JobID] {
			o.log.get().Warn("outcome lost: the job was taken again before it could be recorded; its history says so", "ran_to", ranTo(o))
		} else {
			o.log.get().Warn("outcome not written: the job no longer holds this claim", "ran_to", ranTo(o))
		}
	}
}

// ranTo says how an attempt whose outcome was lost ended.
func ranTo(o outcome) string {
	switch o.d.act {
	case actComplete:
		return "succeeded"
	case actRetry:
		return "failed (" + o.attempt.Class + ": " + o.attempt.Message + "), to be retried"
	default:
		return "failed (" + o.attempt.Class + ": " + o.attempt.Message + "), to be dead-lettered as " + string(o.d.reason)
	}
}

// abandon gives up on writing an outcome: the job keeps its lease until it
// expires, and then the rescuer runs it again. At-least-once holds, at the
// cost of an attempt. The worker remembers the claim meanwhile, so that
// it never hands the job back as a claim whose reply was lost: its
// handler ran.
func (c *completer) abandon(o outcome, err error) {
	o.log.get().Error("recording job outcome failed; the job will be redelivered when its lease expires", "err", err)
	c.w.giveUp(o.lease, o.active.job.AttemptedAt)
}
