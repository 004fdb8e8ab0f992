package worker

import "context"

// expirePauses records the pauses whose time ran out, with their audit
// entries. The claim already ignores them (it compares until with the
// database's clock); this is the record, written once by whichever worker
// or console notices first.
func (w *Worker) expirePauses(ctx context.Context) {
	expired, err := w.store.ExpirePauses(ctx, w.cfg.NowFunc())
	switch {
	case err != nil:
		w.noteFailure(err)
		if ctx.Err() == nil {
			w.log.Warn("recording expired pauses failed; trying again at the next rescue", "err", err)
		}
	case len(expired) > 0:
		for _, p := range expired {
			w.log.Info("pause expired", "pause_id", p.ID, "kind", p.Kind, "name", p.Name)
		}
		signal(w.wake)
	}
}

// expireThrottles records the throttles whose time ran out, as
// expirePauses does the pauses.
func (w *Worker) expireThrottles(ctx context.Context) {
	expired, err := w.store.ExpireThrottles(ctx, w.cfg.NowFunc())
	switch {
	case err != nil:
		w.noteFailure(err)
		if ctx.Err() == nil {
			w.log.Warn("recording expired throttles failed; trying again at the next rescue", "err", err)
		}
	case len(expired) > 0:
		for _, t := range expired {
			w.log.Info("throttle expired", "throttle_id", t.ID, "kind", t.Kind, "name", t.Name)
		}
		signal(w.wake)
	}
}
