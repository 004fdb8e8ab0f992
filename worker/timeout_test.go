package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestTimeoutChoice: the job's own timeout, else its task's, else the
// worker's default, and never over the worker's cap (MaxTimeout, which
// --job-timeout sets). Each case's handler waits for its context, so the
// limit that applied is the one its Timeout attempt names.
func TestTimeoutChoice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name                     string
		task, job, defaults, max time.Duration
		want                     string
	}{
		{"CapShortensATaskTimeout", 20 * time.Second, 0, 10 * time.Second, 150 * time.Millisecond, "150ms timeout"},
		{"CapShortensAJobTimeout", 0, 20 * time.Second, 10 * time.Second, 150 * time.Millisecond, "150ms timeout"},
		{"JobTimeoutWinsOverTheTasks", 20 * time.Second, 120 * time.Millisecond, 10 * time.Second, 0, "120ms timeout"},
		{"TaskTimeoutUnderTheCapApplies", 130 * time.Millisecond, 0, 10 * time.Second, time.Minute, "130ms timeout"},
		{"DefaultAppliesToTasksWithNone", 0, 0, 140 * time.Millisecond, time.Minute, "140ms timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
				<-ctx.Done()
				return ctx.Err()
			}, worker.TaskOptions{Timeout: c.task})
			cfg := b.config("w-" + c.name)
			cfg.DefaultTimeout, cfg.MaxTimeout = c.defaults, c.max
			b.start(t, cfg)
			id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1, Timeout: c.job})
			b.waitJob(t, id, dlq.StateDead, 15*time.Second)
			h := b.deadLetters(t, id)[0].History[0]
			if h.Class != "Timeout" || !strings.Contains(h.Message, c.want) {
				t.Fatalf("attempt %s %q, want a Timeout naming the %s", h.Class, h.Message, c.want)
			}
		})
	}
}
