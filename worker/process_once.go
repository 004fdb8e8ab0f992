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
//
// What a task logs through it at Info and above is also kept with the
// attempt (the first 64 KiB, the cut said): a failed attempt's lines are
// written with its outcome into the job's history, and so onto its dead
// letter, where the letter and job pages show them masked like its error.
// A succeeded attempt's lines are not kept (they would cost every success
// a larger write); they reach the worker's own logger, as every line does.
// A line logged after the attempt ended, by a goroutine the task left
// running, reaches only the worker's own logger.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*jobLog); ok {
		return l.forTask()
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
	// The task's logger (forTask) and the lines it keeps, built on first
	// use too: a task that logs nothing costs its attempt nothing more.
	// The once is also spent when the attempt ends (endLines), so that a
	// logger asked for later keeps nothing.
	taskOnce sync.Once
	task     *slog.Logger
	lines    *attemptLines
}

// init sets the logger up for job; it must not have been used yet.
func (j *jobLog) init(base *slog.Logger, job *dlq.Job) { j.base, j.job = base, job }

// get is the worker's own logger for the job: what the worker says of it
// (retried, dead-lettered) goes there, and is not kept with the attempt.
func (j *jobLog) get() *slog.Logger {
	j.once.Do(func() {
		j.l = j.base.With("job_id", j.job.ID, "task", j.job.Task, "queue", j.job.Queue, "attempt", j.job.Attempt)
	})
	return j.l
}

// forTask is the logger Logger hands the task: the worker's own, whose
// lines are also kept with the attempt while it runs.
func (j *jobLog) forTask() *slog.Logger {
	j.taskOnce.Do(func() {
		j.lines = &attemptLines{}
		j.task = slog.New(newKeepingHandler(j.lines, j.get().Handler()))
	})
	if j.task == nil {
		// Asked for after the attempt ended, with nothing logged during it.
		return j.get()
	}
	return j.task
}

// endLines ends the attempt's lines and returns them ("" when the task
// logged none). With keep false they are dropped unformatted: a succeeded
// attempt's are not stored.
func (j *jobLog) endLines(keep bool) string {
	j.taskOnce.Do(func() {})
	if j.lines == nil {
		return ""
	}
	if !keep {
		j.lines.drop()
		return ""
	}
	return j.lines.close()
}
