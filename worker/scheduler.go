package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive/dlq"
)

// The scheduler enqueues the occurrences of the worker's schedules. Every
// worker that registers a schedule runs it, with no leader: an occurrence
// is enqueued by one statement that only the first worker to reach it gets
// through (store/queue.EnqueueOccurrence), and its job carries the
// occurrence's idempotency key. It is its own loop, apart from the claim
// path, and costs one statement per occurrence per worker.

const (
	// scheduleRetry is how soon a failed enqueue of an occurrence is tried
	// again: the occurrence stays due until it is enqueued.
	scheduleRetry = time.Second
	// maxScheduleWait bounds the scheduler's sleep, so that a clock that
	// jumps (a suspended VM, NTP) delays an occurrence by a minute at most.
	maxScheduleWait = time.Minute
)

// scheduleRun is a schedule as the scheduler loop keeps it: the occurrence
// it waits for. Only the loop touches it.
type scheduleRun struct {
	registeredSchedule
	next time.Time
}

// registerSchedules records the worker's schedules and starts each from
// the next run the database holds: the fleet's, when other workers run it
// already; the first occurrence after now, when it is new or its timing
// changed.
func (w *Worker) registerSchedules(ctx context.Context) error {
	if len(w.schedules) == 0 {
		return nil
	}
	now := w.cfg.NowFunc()
	defs := make([]dlq.ScheduleDefinition, len(w.schedules))
	for i, s := range w.schedules {
		defs[i] = s.def
		defs[i].NextRunAt = s.timing.next(now)
	}
	next, err := w.store.RegisterSchedules(ctx, defs)
	if err != nil {
		return fmt.Errorf("worker: start: %w", err)
	}
	for _, s := range w.schedules {
		s.next = next[s.def.Name]
	}
	return nil
}

// scheduleLoop enqueues each occurrence as it comes due, until ctx ends.
func (w *Worker) scheduleLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(w.enqueueDue(ctx))
	}
}

// enqueueDue enqueues the occurrences due now and returns how long to wait
// for the next one.
func (w *Worker) enqueueDue(ctx context.Context) time.Duration {
	now := w.cfg.NowFunc()
	wait := maxScheduleWait
	for _, s := range w.schedules {
		if !s.next.After(now) {
			w.enqueueOccurrence(ctx, s, now)
		}
		if s.next.After(now) {
			wait = min(wait, s.next.Sub(now))
		} else {
			wait = min(wait, scheduleRetry)
		}
	}
	return wait
}

// enqueueOccurrence enqueues s's due occurrence (or finds another worker
// did) and moves s on; a failure leaves it due, to be tried again.
func (w *Worker) enqueueOccurrence(ctx context.Context, s *scheduleRun, now time.Time) {
	following := followingRun(s.timing, s.next, now)
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	o, err := w.store.EnqueueOccurrence(wctx, s.def.Name, s.next, following)
	if err != nil {
		if ctx.Err() == nil {
			w.noteFailure(err)
			w.log.Warn("schedule: occurrence not enqueued; trying again", "schedule", s.def.Name,
				"occurrence", s.next, "err", err)
		}
		return
	}
	switch {
	case o.JobID != 0:
		w.log.Debug("schedule: occurrence enqueued", "schedule", s.def.Name, "occurrence", s.next, "job", o.JobID)
	case o.Taken && !o.Enabled:
		w.log.Debug("schedule: disabled; occurrence skipped", "schedule", s.def.Name, "occurrence", s.next)
	}
	s.next = following
}
