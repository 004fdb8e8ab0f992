package worker

import (
	"context"
	"time"
)

// cleanBatch bounds one delete of the cleaner: short transactions that
// never hold many row locks or bloat one WAL flush, looped while full.
const cleanBatch = 10_000

// cleanerLoop deletes succeeded jobs past Config.RetainSucceeded every
// Config.CleanInterval until ctx is cancelled. Every worker runs it; an
// advisory lock in the store lets one of them delete at a time.
func (w *Worker) cleanerLoop(ctx context.Context) {
	if w.cfg.RetainSucceeded < 0 {
		tell(w.signals.cleaned)
		return
	}
	tick := time.NewTicker(w.cfg.CleanInterval)
	defer tick.Stop()
	for {
		w.clean(ctx)
		tell(w.signals.cleaned)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// clean deletes, batch after batch, the succeeded jobs that finished before
// the retention's cutoff, and stops at the first short batch, at an error
// or when another worker's cleaner holds the lock.
func (w *Worker) clean(ctx context.Context) {
	cutoff := w.cfg.NowFunc().Add(-w.cfg.RetainSucceeded)
	total := 0
	for ctx.Err() == nil {
		n, busy, err := w.store.DeleteSucceeded(ctx, cutoff, cleanBatch)
		if err != nil {
			if ctx.Err() == nil {
				w.log.Warn("deleting succeeded jobs failed; trying again at the next interval", "err", err)
			}
			break
		}
		total += n
		w.metrics.cleaned.Add(float64(n))
		if busy || n < cleanBatch {
			break
		}
	}
	if total > 0 {
		w.log.Info("deleted succeeded jobs past their retention", "jobs", total, "retain", w.cfg.RetainSucceeded)
	}
}
