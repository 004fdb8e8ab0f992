package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
)

// ProcessOnce applies an event's effect at most once however often the job
// carrying it is delivered, which together with at-least-once delivery makes
// the effect happen exactly once. It runs fn in a transaction that also
// records eventID in processed_events; both commit or neither does. When
// eventID was recorded before, fn is not called and ProcessOnce returns
// applied=false with a nil error: a duplicate is a normal, logged no-op.
//
// fn must do all its work through tx. Effects outside this database (an
// e-mail, a payment API) are not covered: pass such a service the event id
// as its idempotency key instead.
func ProcessOnce(ctx context.Context, db *sqlx.DB, eventID string, fn func(tx *sqlx.Tx) error) (applied bool, err error) {
	if db == nil || fn == nil {
		return false, errors.New("process once: db and fn are required")
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("process once %q: begin: %w", eventID, err)
	}
	defer tx.Rollback()
	fresh, err := queue.MarkProcessed(ctx, tx, eventID)
	if err != nil {
		return false, fmt.Errorf("process once: %w", err)
	}
	if !fresh {
		Logger(ctx).Info("duplicate event skipped: already processed", "event_id", eventID)
		return false, nil
	}
	if err := fn(tx); err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("process once %q: commit: %w", eventID, err)
	}
	return true, nil
}

type loggerKey struct{}

func withLogger(ctx context.Context, l *jobLog) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the logger of the job running under ctx, carrying the
// worker, job id, task, queue and attempt; outside a job it discards.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*jobLog); ok {
		return l.get()
	}
	return slog.New(slog.DiscardHandler)
}

// jobLog is a job's logger, built on first use: most jobs log nothing,
// and slog's With formats its attributes when it is called, which cost a
// tenth of the worker's CPU per short job.
type jobLog struct {
	once sync.Once
	base *slog.Logger
	job  *dlq.Job
	l    *slog.Logger
}

// init sets the logger up for job; it must not have been used yet.
func (j *jobLog) init(base *slog.Logger, job *dlq.Job) { j.base, j.job = base, job }

func (j *jobLog) get() *slog.Logger {
	j.once.Do(func() {
		j.l = j.base.With("job_id", j.job.ID, "task", j.job.Task, "queue", j.job.Queue, "attempt", j.job.Attempt)
	})
	return j.l
}
