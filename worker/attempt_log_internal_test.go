package worker

import (
	"context"
	"io"
	"log/slog"
	"strings"
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

// TestKeptLinesAreWhatWasLogged: a line waits unformatted only when its
// values cannot change, so a map changed after it was logged is kept as
// it was, and the lines keep the order they were logged in, whichever
// waited; a success keeps none of them.
func TestKeptLinesAreWhatWasLogged(t *testing.T) {
	job := dlq.Job{ID: 7, Task: "billing.charge", Queue: "default", Attempt: 1}
	logAll := func() *jobLog {
		var j jobLog
		j.init(slog.New(slog.DiscardHandler), &job)
		log := Logger(withLogger(context.Background(), &j))
		cart := map[string]int{"sku-1": 1}
		log.Info("first", "n", 1)
		log.Info("cart", "cart", cart)
		cart["sku-2"] = 2
		log.With("gateway", "stripe").Warn("third", "ms", 900)
		return &j
	}
	lines := strings.Split(strings.TrimSpace(logAll().endLines(true)), "\n")
	want := []string{"msg=first n=1", "msg=cart cart=map[sku-1:1]", "msg=third gateway=stripe ms=900"}
	if len(lines) != len(want) {
		t.Fatalf("kept %d lines, want %d: %q", len(lines), len(want), lines)
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %q, want it to end with %q", i+1, lines[i], w)
		}
	}

	if kept := logAll().endLines(false); kept != "" {
		t.Errorf("a success kept %q", kept)
	}
}
