package worker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// refused is a realistic transient error: what dialing a down service gives.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 4, 23), Port: 443},
		Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
}

type declinedError struct{ order string }

func (e *declinedError) Error() string      { return "card declined for order " + e.order }
func (e *declinedError) ErrorClass() string { return "PaymentDeclined" }

// explodeInventory panics the way real code does: a write to a nil map.
func explodeInventory(sku string) {
	var reserved map[string]int
	//lint:ignore SA5000 the nil-map write is the point: a real panic for the traceback tests
	reserved[sku]++
}

func TestFailures(t *testing.T) {
	t.Parallel()

	t.Run("TransientFailuresRetryWithGrowingJitteredDelaysThenSucceed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var mu sync.Mutex
		var failedAt, calledAt []time.Time
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			mu.Lock()
			defer mu.Unlock()
			calledAt = append(calledAt, time.Now())
			if job.Attempt <= 3 {
				failedAt = append(failedAt, time.Now())
				return refused()
			}
			return nil
		}, worker.TaskOptions{})
		cfg := b.config("w-retry")
		// A fixed jitter sequence makes the delays exact: ceilings 20, 40,
		// then 50 (capped from 80) ms, times 0.9, 0.8, 0.7.
		seq := []float64{0.9, 0.8, 0.7}
		var seqMu sync.Mutex
		policy := worker.RetryPolicy{Base: 20 * time.Millisecond, Cap: 50 * time.Millisecond, RandFunc: func() float64 {
			seqMu.Lock()
			defer seqMu.Unlock()
			r := seq[0]
			seq = seq[1:]
			return r
		}}
		cfg.RetryPolicy = policy
		b.start(t, cfg)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 5})
		j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)

		if j.Attempt != 4 || len(j.Errors) != 3 {
			t.Fatalf("want success on attempt 4 after 3 failures, have attempt %d, %d errors", j.Attempt, len(j.Errors))
		}
		wantMS := []int64{18, 32, 35}
		for i, a := range j.Errors {
			ceiling := policy.Ceiling(a.Attempt)
			if a.Attempt != i+1 || a.Outcome != dlq.OutcomeRetry || a.RetryInMS != wantMS[i] {
				t.Errorf("attempt %d: %+v, want retry in %dms", i+1, a, wantMS[i])
			}
			if a.RetryInMS < 0 || time.Duration(a.RetryInMS)*time.Millisecond > ceiling {
				t.Errorf("attempt %d: delay %dms outside [0, %s]", a.Attempt, a.RetryInMS, ceiling)
			}
			if a.Class != "net.OpError" || !strings.Contains(a.Message, "connection refused") ||
				a.Worker != "w-retry" || a.Host == "" || a.Version != "test-1.2.3" || a.At.IsZero() {
				t.Errorf("attempt %d not fully recorded: %+v", a.Attempt, a)
			}
		}
		if c := []time.Duration{policy.Ceiling(1), policy.Ceiling(2), policy.Ceiling(3)}; !(c[0] < c[1] && c[1] < c[2]) {
			t.Errorf("ceilings do not grow: %v", c)
		}
		// The worker honoured each delay: no attempt ran before its run_at.
		mu.Lock()
		defer mu.Unlock()
		for i := range failedAt {
			if gap, min := calledAt[i+1].Sub(failedAt[i]), time.Duration(wantMS[i])*time.Millisecond; gap < min {
				t.Errorf("attempt %d ran %s after the failure, before its %s delay", i+2, gap, min)
			}
		}
	})

	t.Run("ExhaustionMakesOneDeadLetterWithFullHistory", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return refused() }, worker.TaskOptions{})
		b.start(t, b.config("w-exhaust"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Queue: "default", MaxAttempts: 3,
			Kwargs: kwargs(map[string]any{"order_id": "ord_1"})})
		j := b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		dls := b.deadLetters(t, id)
		if len(dls) != 1 {
			t.Fatalf("want exactly one dead letter, have %d", len(dls))
		}
		dl := dls[0]
		if dl.Reason != dlq.ReasonExhausted || dl.Attempts != 3 || dl.MaxAttempts != 3 || len(dl.History) != 3 {
			t.Fatalf("letter: reason %s attempts %d/%d history %d", dl.Reason, dl.Attempts, dl.MaxAttempts, len(dl.History))
		}
		if dl.ErrorClass != "net.OpError" || !strings.Contains(dl.ErrorMessage, "10.0.4.23:443") ||
			dl.WorkerVersion != "test-1.2.3" || dl.Fingerprint == "" || string(dl.Kwargs) != `{"order_id": "ord_1"}` {
			t.Fatalf("letter lacks the failure's details: %+v", dl)
		}
		for i, want := range []dlq.Outcome{dlq.OutcomeRetry, dlq.OutcomeRetry, dlq.OutcomeDead} {
			if h := dl.History[i]; h.Attempt != i+1 || h.Outcome != want || h.Worker != "w-exhaust" || h.Class != "net.OpError" {
				t.Errorf("history[%d] = %+v, want attempt %d outcome %s", i, h, i+1, want)
			}
		}
		if j.LeaseOwner != nil || j.FinishedAt == nil {
			t.Fatalf("dead job still leased or unfinished: %+v", j)
		}
	})

	t.Run("PermanentErrorDeadLettersAfterOneAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		calls := 0
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			calls++
			return worker.Permanent(&declinedError{order: "ord_7Q2M"})
		}, worker.TaskOptions{})
		b.start(t, b.config("w-permanent"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 5})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		dls := b.deadLetters(t, id)
		if len(dls) != 1 || dls[0].Reason != dlq.ReasonPermanent || dls[0].Attempts != 1 || len(dls[0].History) != 1 {
			t.Fatalf("want one permanent letter after one attempt: %+v", dls)
		}
		if dls[0].ErrorClass != "PaymentDeclined" || dls[0].ErrorMessage != "card declined for order ord_7Q2M" {
			t.Fatalf("class/message: %q %q", dls[0].ErrorClass, dls[0].ErrorMessage)
		}
		if calls != 1 {
			t.Fatalf("handler ran %d times", calls)
		}
	})

	t.Run("BinaryGarbageInAnErrorIsStoredNotLost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			// A response body quoted into an error: a NUL and a stray byte
			// that Postgres text and jsonb refuse.
			return worker.Permanent(errors.New("upstream said \x00\xff\xfe: bad body"))
		}, worker.TaskOptions{})
		b.start(t, b.config("w-garbage"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)
		dls := b.deadLetters(t, id)
		if len(dls) != 1 || dls[0].Reason != dlq.ReasonPermanent || dls[0].Attempts != 1 {
			t.Fatalf("want one permanent letter after one attempt, got %+v", dls)
		}
		if want := "upstream said \uFFFD\uFFFD: bad body"; dls[0].ErrorMessage != want {
			t.Fatalf("message %q, want %q", dls[0].ErrorMessage, want)
		}
	})

	t.Run("PanicIsRecoveredRetriedAndKeepsItsTraceback", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			explodeInventory("SKU-1")
			return nil
		}, worker.TaskOptions{})
		b.start(t, b.config("w-panic"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 2})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		dl := b.deadLetters(t, id)[0]
		if dl.ErrorClass != "panic" || dl.ErrorMessage != "assignment to entry in nil map" {
			t.Fatalf("class %q message %q", dl.ErrorClass, dl.ErrorMessage)
		}
		if !strings.Contains(dl.Traceback, "worker_test.explodeInventory") || !strings.HasPrefix(dl.Traceback, "panic: ") {
			t.Fatalf("traceback lacks the panicking function:\n%s", dl.Traceback)
		}
		// Transient: the first panic was retried, not dead-lettered.
		if dl.Reason != dlq.ReasonExhausted || dl.History[0].Outcome != dlq.OutcomeRetry ||
			!strings.Contains(dl.History[0].Traceback, "explodeInventory") {
			t.Fatalf("a panic must be retried: reason %s, history %+v", dl.Reason, dl.History)
		}
	})

	t.Run("UnknownTaskDeadLettersPermanentAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		b.start(t, b.config("w-unknown"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "ghost.task", MaxAttempts: 5})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		dls := b.deadLetters(t, id)
		if len(dls) != 1 || dls[0].Reason != dlq.ReasonPermanent || dls[0].ErrorClass != "UnknownTask" || dls[0].Attempts != 1 {
			t.Fatalf("want a permanent UnknownTask letter: %+v", dls)
		}
		if !strings.Contains(dls[0].ErrorMessage, `"ghost.task"`) || !strings.Contains(dls[0].ErrorMessage, "test.task") {
			t.Fatalf("message should name the task and what the worker runs: %q", dls[0].ErrorMessage)
		}
	})

	t.Run("TaskTimeoutCancelsHandlerContextAndRecordsTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		seen := make(chan error, 1)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			select {
			case <-ctx.Done():
				seen <- ctx.Err()
				return ctx.Err()
			case <-time.After(10 * time.Second):
				seen <- nil
				return nil
			}
		}, worker.TaskOptions{Timeout: 100 * time.Millisecond})
		b.start(t, b.config("w-timeout")) // DefaultTimeout is 10s: the task's own applies
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		if err := <-seen; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("handler saw %v, want its context to hit the deadline", err)
		}
		dl := b.deadLetters(t, id)[0]
		h := dl.History[0]
		if dl.ErrorClass != "Timeout" || h.Class != "Timeout" || !strings.Contains(h.Message, "100ms timeout") {
			t.Fatalf("want a Timeout attempt: class %q message %q", h.Class, h.Message)
		}
		if h.DurationMS < 100 || h.DurationMS > 5000 {
			t.Fatalf("attempt lasted %dms, want about the 100ms timeout", h.DurationMS)
		}
	})

	t.Run("DefaultTimeoutAppliesToTasksWithoutOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			<-ctx.Done()
			return ctx.Err()
		}, worker.TaskOptions{})
		cfg := b.config("w-default-timeout")
		cfg.DefaultTimeout = 50 * time.Millisecond
		b.start(t, cfg)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)
		if c := b.deadLetters(t, id)[0].ErrorClass; c != "Timeout" {
			t.Fatalf("class %q, want Timeout", c)
		}
	})
}
