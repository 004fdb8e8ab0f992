package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

type bundle struct {
	db    *storetest.DB
	store *storetest.Stores
	logs  *syncBuffer
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := storetest.NewDB(t)
	if err := demo.EnsureSchema(context.Background(), db.DB); err != nil {
		t.Fatal(err)
	}
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(context.Background(), demo.TaskNames()); err != nil {
		t.Fatal(err)
	}
	b := &bundle{db: db, store: store, logs: &syncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", b.logs.String())
		}
	})
	return b
}

// startWorker runs a worker with the demo tasks and fast, jitter-free
// retries until the test ends.
func (b *bundle) startWorker(t *testing.T, mod func(*worker.Config)) {
	t.Helper()
	reg := worker.NewRegistry()
	demo.Register(reg, b.db.DB)
	cfg := worker.Config{
		Registry: reg, ID: "demo-test", Queues: []string{"default", "payments", "emails"}, Concurrency: 8,
		LeaseDuration: 5 * time.Second, PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second,
		RetryPolicy: worker.RetryPolicy{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond, RandFunc: func() float64 { return 1 }},
		Logger:      slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:     "demo-test",
	}
	if mod != nil {
		mod(&cfg)
	}
	w, err := worker.New(b.store.Queue, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

func (b *bundle) enqueue(t *testing.T, task string, maxAttempts int, kw map[string]any) int64 {
	t.Helper()
	raw, _ := json.Marshal(kw)
	res, err := b.store.Queue.Enqueue(context.Background(), dlq.EnqueueParams{Task: task, MaxAttempts: maxAttempts, Kwargs: raw})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (b *bundle) wait(t *testing.T, id int64, state dlq.State) dlq.Job {
	t.Helper()
	var j dlq.Job
	storetest.WaitFor(t, 10*time.Second, fmt.Sprintf("job %d to be %s", id, state), func() bool {
		var err error
		if j, err = b.store.Queue.Job(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return j.State == state
	})
	return j
}

func (b *bundle) letter(t *testing.T, jobID int64) dlq.DeadLetter {
	t.Helper()
	var dl dlq.DeadLetter
	err := b.db.Get(&dl, `SELECT id, job_id, error_class, error_message, traceback, attempts, reason, history
		FROM dead_letters WHERE job_id = $1`, jobID)
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

func TestTasks(t *testing.T) {
	t.Parallel()

	t.Run("FlakySucceedsAfterFailTimesTransientFailures", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		id := b.enqueue(t, demo.TaskFlaky, 4, map[string]any{"fail_times": 2, "order_id": "ord_7Q2M9K", "amount": 129.9, "currency": "EUR"})
		j := b.wait(t, id, dlq.StateSucceeded)
		if j.Attempt != 3 || len(j.Errors) != 2 {
			t.Fatalf("attempt %d, %d errors; want success on attempt 3", j.Attempt, len(j.Errors))
		}
		a := j.Errors[0]
		if a.Class != "ConnectionRefusedError" || !strings.Contains(a.Message, "ord_7Q2M9K") ||
			!strings.Contains(a.Message, "connect: connection refused") || !strings.Contains(a.Traceback, "demo.capturePayment") {
			t.Fatalf("unrealistic failure: %+v", a)
		}
	})

	t.Run("AlwaysFailExhaustsItsAttempts", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		id := b.enqueue(t, demo.TaskAlwaysFail, 3, map[string]any{"order_id": "ord_A", "sku": "SKU-1042"})
		b.wait(t, id, dlq.StateDead)
		dl := b.letter(t, id)
		if dl.Reason != dlq.ReasonExhausted || dl.Attempts != 3 || dl.ErrorClass != "ServiceUnavailable" ||
			!strings.Contains(dl.ErrorMessage, "/v2/reservations/SKU-1042") || !strings.Contains(dl.Traceback, "demo.reserveStock") {
			t.Fatalf("letter: %+v", dl)
		}
	})

	t.Run("PermanentDeadLettersAtOnceAsDeclinedCardOrBadEmail", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		card := b.enqueue(t, demo.TaskPermanent, 5, map[string]any{"order_id": "ord_B", "amount": 42.5, "currency": "GBP"})
		email := b.enqueue(t, demo.TaskPermanent, 5, map[string]any{"kind": "validation", "order_id": "ord_C", "email": "maria.lopez@"})
		b.wait(t, card, dlq.StateDead)
		b.wait(t, email, dlq.StateDead)
		for id, want := range map[int64][]string{
			card:  {"PaymentDeclined", "ord_B", "42.5 GBP", "demo.chargeCard"},
			email: {"ValidationError", "invalid customer_email for order ord_C", "ord_C", "demo.validateCustomer"},
		} {
			dl := b.letter(t, id)
			if dl.Reason != dlq.ReasonPermanent || dl.Attempts != 1 || dl.ErrorClass != want[0] ||
				!strings.Contains(dl.ErrorMessage, want[1]) || !strings.Contains(dl.ErrorMessage, want[2]) ||
				!strings.Contains(dl.Traceback, want[3]) {
				t.Errorf("job %d letter: %+v", id, dl)
			}
		}
	})

	t.Run("ErrorsQuoteNoPayload", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		// Kwargs that do not decode, and an address that does not validate:
		// the letter says what is wrong, not what the payload holds.
		badType := b.enqueue(t, demo.TaskPermanent, 1, map[string]any{"password": "decode-leak-PW-9876", "fail_times": "9876-x"})
		badNumber := b.enqueue(t, demo.TaskFlaky, 1, map[string]any{"password": "decode-leak-PW-9876", "amount": "12-9876"})
		email := b.enqueue(t, demo.TaskPermanent, 1, map[string]any{"kind": "validation", "order_id": "ord_E", "email": "maria.lopez@"})
		for _, id := range []int64{badType, badNumber, email} {
			b.wait(t, id, dlq.StateDead)
			dl := b.letter(t, id)
			for _, leak := range []string{"decode-leak", "9876", "maria.lopez"} {
				if strings.Contains(dl.ErrorMessage, leak) || strings.Contains(dl.Traceback, leak) {
					t.Errorf("job %d: the error quotes %q: %s", id, leak, dl.ErrorMessage)
				}
			}
			if dl.ErrorClass != "ValidationError" || !strings.Contains(dl.ErrorMessage, "invalid ") {
				t.Errorf("job %d: %s %s", id, dl.ErrorClass, dl.ErrorMessage)
			}
		}
		if dl := b.letter(t, badType); !strings.Contains(dl.ErrorMessage, `field "fail_times" must be int, not a JSON string`) {
			t.Errorf("type error says: %s", dl.ErrorMessage)
		}
	})

	t.Run("PanicIsARealRuntimeErrorWithItsTraceback", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		id := b.enqueue(t, demo.TaskPanic, 2, map[string]any{"order_id": "ord_D", "warehouse": 2})
		b.wait(t, id, dlq.StateDead)
		dl := b.letter(t, id)
		if dl.ErrorClass != "panic" || !strings.Contains(dl.ErrorMessage, "index out of range") ||
			!strings.Contains(dl.Traceback, "demo.allocateShipment") || dl.Reason != dlq.ReasonExhausted {
			t.Fatalf("letter: %+v", dl)
		}
	})

	t.Run("SleepHonoursCancellation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		reg := worker.NewRegistry()
		demo.Register(reg, b.db.DB)
		w, err := worker.New(b.store.Queue, worker.Config{Registry: reg, ShutdownGrace: 100 * time.Millisecond,
			PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(b.logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		id := b.enqueue(t, demo.TaskSleep, 3, map[string]any{"seconds": 300})
		b.wait(t, id, dlq.StateRunning)
		stopped := time.Now()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("a sleep that honours cancellation is not abandoned: %v", err)
		}
		if took := time.Since(stopped); took > 3*time.Second {
			t.Fatalf("stopping took %s", took)
		}
		if j := b.wait(t, id, dlq.StateAvailable); j.LeaseOwner != nil {
			t.Fatalf("not handed back: %+v", j)
		}
	})

	t.Run("ApplyProductEventIsDeduplicatedAndVersionGuarded", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// One at a time, in enqueue order: the late v2 arrives after v3.
		b.startWorker(t, func(c *worker.Config) { c.Concurrency = 1 })
		ids := []int64{
			b.enqueue(t, demo.TaskApplyProductEvent, 3, map[string]any{"event_id": "evt_1", "product_id": "P-1001", "version": 1, "price": 10.00}),
			b.enqueue(t, demo.TaskApplyProductEvent, 3, map[string]any{"event_id": "evt_3", "product_id": "P-1001", "version": 3, "price": 30.25}),
			b.enqueue(t, demo.TaskApplyProductEvent, 3, map[string]any{"event_id": "evt_2", "product_id": "P-1001", "version": 2, "price": 20.00}),
			b.enqueue(t, demo.TaskApplyProductEvent, 3, map[string]any{"event_id": "evt_3", "product_id": "P-1001", "version": 3, "price": 99.99}),
		}
		for _, id := range ids {
			b.wait(t, id, dlq.StateSucceeded)
		}
		p, err := demo.ReadProduct(context.Background(), b.db.DB, "P-1001")
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != 3 || p.Price != "30.25" {
			t.Fatalf("product %+v, want v3 at 30.25: the stale v2 and the duplicate evt_3 must not apply", p)
		}
		var events int
		if err := b.db.Get(&events, `SELECT count(*) FROM processed_events`); err != nil || events != 3 {
			t.Fatalf("%d processed events (%v), want 3", events, err)
		}
		if !strings.Contains(b.logs.String(), "stale product event ignored") || !strings.Contains(b.logs.String(), "duplicate event skipped") {
			t.Fatal("stale and duplicate events should be logged")
		}
	})

	t.Run("MalformedKwargsArePermanentValidationErrors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.startWorker(t, nil)
		missing := b.enqueue(t, demo.TaskApplyProductEvent, 3, map[string]any{"event_id": "evt_9", "version": 1, "price": 1})
		badType := b.enqueue(t, demo.TaskSleep, 3, map[string]any{"seconds": "soon"})
		for _, id := range []int64{missing, badType} {
			b.wait(t, id, dlq.StateDead)
			if dl := b.letter(t, id); dl.Reason != dlq.ReasonPermanent || dl.ErrorClass != "ValidationError" || dl.Attempts != 1 {
				t.Errorf("job %d letter: %+v", id, dl)
			}
		}
	})
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
