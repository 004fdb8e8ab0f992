package replay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redrive/redrive/dlq"
)

// RetentionStore purges settled letters, holding those of growing groups
// (store/operations).
type RetentionStore interface {
	PurgeSettled(ctx context.Context, p dlq.PurgeParams) (int64, []dlq.PurgeHold, error)
}

// Retention is the console's scheduled retention of settled letters
// (REDRIVE_RETAIN_LETTERS): at every dlq.NextPurge it deletes the letters
// replayed or discarded longer than RetainFor ago, except those of groups
// still growing, which it holds for an operator (see PurgeSettled). Every
// console runs it; two purging at once split the letters between them
// (the purge skips letters another holds locked), and each batch is
// audited by whoever deleted it.
type Retention struct {
	Store     RetentionStore
	RetainFor time.Duration
	Logger    *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Run purges at each scheduled time until ctx ends. A failed purge is
// logged and tried again at the next.
func (r *Retention) Run(ctx context.Context) error {
	if r.RetainFor <= 0 {
		return nil
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	for {
		t := time.NewTimer(time.Until(dlq.NextPurge(now())))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		n, holds, err := r.Store.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: r.RetainFor, Now: now(),
			Actor: dlq.Actor{Name: "retention", UserAgent: "redrive serve (REDRIVE_RETAIN_LETTERS)"}})
		switch {
		case err != nil && errors.Is(ctx.Err(), context.Canceled):
			return nil
		case err != nil:
			r.Logger.Warn("retention purge failed; trying again at the next hour", "purged", n, "err", err)
		default:
			held := int64(0)
			for _, h := range holds {
				held += h.Letters
			}
			r.Logger.Info("retention purge", "purged", n, "held", held, "held_groups", len(holds), "retain", r.RetainFor)
		}
	}
}
