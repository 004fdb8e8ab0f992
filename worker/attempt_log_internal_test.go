package worker

import (
	"context"
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
	b.Run("NothingLogged", func(b *testing.B) { run(b, 0, false) })
	b.Run("ThreeLinesSucceeded", func(b *testing.B) { run(b, 3, false) })
	b.Run("ThreeLinesFailed", func(b *testing.B) { run(b, 3, true) })
}
