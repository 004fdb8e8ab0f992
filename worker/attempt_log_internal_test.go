package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// BenchmarkAttemptLines is what keeping an attempt's lines costs one job,
// against the ~16 µs of worker CPU a job takes in a drain: nothing
// logged, and three lines logged (a success's, dropped; a failure's,
// kept), the worker's own logger discarding as the drain's does.
func BenchmarkAttemptLines(b *testing.B) {
	base := slog.New(slog.DiscardHandler)
	job := dlq.Job{ID: 42, Task: "billing.charge", Queue: "default", Attempt: 1}
	run := func(b *testing.B, lines int, keep bool) {
		b.ReportAllocs()
		for b.Loop() {
			var j jobLog
			j.init(base, &job)
			ctx := withLogger(context.Background(), &j)
			for i := range lines {
				Logger(ctx).Info("charging card", "order", "A-1042", "line", i)
			}
			_ = j.endLines(keep)
		}
	}
	// What the same three lines cost through a plain slog logger writing
	// them out, as a task would log without Redrive: the part of the cost
	// that is logging's own, not keeping's.
	b.Run("ThreeLinesPlainTextLogger", func(b *testing.B) {
		b.ReportAllocs()
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		for b.Loop() {
			l := log.With("job_id", job.ID, "task", job.Task, "queue", job.Queue, "attempt", job.Attempt)
			for i := range 3 {
				l.Info("charging card", "order", "A-1042", "line", i)
			}
		}
	})
	b.Run("NothingLogged", func(b *testing.B) { run(b, 0, false) })
	b.Run("ThreeLinesSucceeded", func(b *testing.B) { run(b, 3, false) })
	b.Run("ThreeLinesFailed", func(b *testing.B) { run(b, 3, true) })
}
