package replay_test

import (
	"context"
	"errors"
	"math"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

type bundle struct {
	store *storetest.Stores
	db    *storetest.DB
	svc   *replay.Service
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	if err := store.Queue.RegisterTasks(context.Background(), []string{"t.ok"}); err != nil {
		t.Fatal(err)
	}
	return bundle{store: store, db: db, svc: replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue})}
}

func (b bundle) letters(t *testing.T, n int) []int64 {
	t.Helper()
	var ids []int64
	err := b.db.Select(&ids, `
		INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, attempts,
			max_attempts, reason, fingerprint, enqueued_at, worker_version)
		SELECT 500000 + g, 'default', 't.ok', '[1]', '{"a":1}', 'E', 'boom', 3, 3, 'exhausted', 'fp', now(), 'v1.4.2'
		FROM generate_series(1, $1) g RETURNING id`, n)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (b bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Get(&n, q, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	viewer   = replay.Actor{Actor: dlq.Actor{Name: "vic"}, Role: dlq.RoleViewer}
	operator = replay.Actor{Actor: dlq.Actor{Name: "olga"}, Role: dlq.RoleOperator}
)

func strp(s string) *string { return &s }

func TestPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ViewerMayNotAct", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.letters(t, 1)[0]
		_, err1 := b.svc.Replay(ctx, replay.ReplayRequest{ID: id, Actor: viewer})
		_, err2 := b.svc.Discard(ctx, replay.DiscardRequest{ID: id, Actor: viewer, Reason: "no"})
		_, err3 := b.svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: viewer, Selection: dlq.Selection{IDs: []int64{id}}})
		for i, err := range []error{err1, err2, err3} {
			if !errors.Is(err, replay.ErrForbidden) {
				t.Errorf("action %d by a viewer: want forbidden, got %v", i, err)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM dead_letters WHERE status <> 'pending'`); n != 0 {
			t.Fatal("a forbidden action changed a letter")
		}
	})

	t.Run("InvalidEditedJSONChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.letters(t, 1)[0]
		cases := map[string]replay.ReplayRequest{
			"syntax":       {ID: id, Actor: operator, Kwargs: strp("{\n  \"a\": 1,\n}")},
			"args shape":   {ID: id, Actor: operator, Args: strp(`{"a":1}`)},
			"kwargs shape": {ID: id, Actor: operator, Kwargs: strp(`[1]`)},
			"empty":        {ID: id, Actor: operator, Args: strp(" ")},
		}
		for name, r := range cases {
			_, err := b.svc.Replay(ctx, r)
			var ee *replay.EditError
			if !errors.As(err, &ee) {
				t.Errorf("%s: want an EditError, got %v", name, err)
			}
		}
		_, err := b.svc.Replay(ctx, cases["syntax"])
		if err == nil || !containsAll(err.Error(), "line 3") {
			t.Errorf("syntax error should say where: %v", err)
		}
		if n := b.count(t, `SELECT count(*) FROM jobs`) + b.count(t, `SELECT count(*) FROM audit_events`); n != 0 {
			t.Fatal("an invalid edit changed something")
		}
	})

	t.Run("LargeBulkNeedsTheTypedNumber", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.letters(t, 1001)
		f, _ := handlers.ParseFilter(url.Values{"task": {"t.ok"}}, time.Now())
		req := replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Selection: dlq.Selection{Filter: &f},
			RequireTyped: true}
		// Nothing typed, or the wrong number: refused, whatever the client
		// claims the count was; the server counts.
		for _, typed := range []string{"", "0", "1000", "abc"} {
			req.Typed = typed
			_, err := b.svc.StartBulk(ctx, req)
			var ce *replay.ConfirmError
			if !errors.As(err, &ce) || ce.Expected != 1001 {
				t.Fatalf("typed %q: want a ConfirmError expecting 1001, got %v", typed, err)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM operations`) + b.count(t, `SELECT count(*) FROM audit_events`); n != 0 {
			t.Fatal("a refused confirmation wrote something")
		}
		req.Typed = "1,001"
		if _, err := b.svc.StartBulk(ctx, req); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("DryRunChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ids := b.letters(t, 7)
		op, err := b.svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, DryRun: true,
			Selection: dlq.Selection{IDs: ids}})
		if err != nil || op.Matched != 7 || op.ID != 0 {
			t.Fatalf("dry run: %+v %v", op, err)
		}
		if n := b.count(t, `SELECT count(*) FROM operations`); n != 0 {
			t.Fatal("a dry run recorded an operation")
		}
	})

	t.Run("WarnsWhenLiveWorkersRunTheFailingBuild", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.letters(t, 1)[0]
		letter := dlq.DeadLetter{ID: id, WorkerVersion: "v1.4.2"}
		if msg, _ := b.svc.VersionWarning(ctx, letter, time.Minute); msg != "" {
			t.Fatalf("no workers, yet a warning: %s", msg)
		}
		if err := b.store.Queue.RegisterWorker(ctx, dlq.WorkerInfo{ID: "w1", Host: "h", PID: 1, Version: "v1.4.2",
			Queues: []string{"default"}, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		msg, err := b.svc.VersionWarning(ctx, letter, time.Minute)
		if err != nil || !containsAll(msg, "v1.4.2", "likely fail") {
			t.Fatalf("want a warning naming v1.4.2, got %q %v", msg, err)
		}
		// A bulk replay is judged by its newest letters: one of them on
		// the live build is enough.
		newest := []dlq.DeadLetter{{WorkerVersion: "v1.5.0"}, {}, {WorkerVersion: "v1.4.2"}}
		msg, err = b.svc.SelectionVersionWarning(ctx, newest, time.Minute)
		if err != nil || !containsAll(msg, "newest of these letters", "v1.4.2", "likely fail") {
			t.Fatalf("want a warning naming v1.4.2 for the selection, got %q %v", msg, err)
		}
		if msg, _ := b.svc.SelectionVersionWarning(ctx, newest[:2], time.Minute); msg != "" {
			t.Fatalf("no live worker runs v1.5.0, yet a warning: %s", msg)
		}
	})
}

func TestRunnerCarriesOutOperations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setup(t)
	b.letters(t, 5000)
	runner := replay.NewRunner(replay.RunnerConfig{Store: b.store.Operations, BatchSize: 1000, PollInterval: 50 * time.Millisecond})
	svc := replay.NewService(replay.Config{Store: b.store.Operations, Workers: b.store.Queue, Wake: runner.Wake})
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()

	f, _ := handlers.ParseFilter(url.Values{"task": {"t.ok"}}, time.Now())
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	// Every letter handed to the queue; no worker runs here, so the
	// operation settles (e2e's TestFollowThroughWithARealWorker runs one).
	storetest.WaitFor(t, 30*time.Second, "the operation to settle", func() bool {
		if op, err = b.store.Operations.Operation(ctx, op.ID); err != nil {
			t.Fatal(err)
		}
		return op.State == dlq.OpSettling
	})
	if op.State != dlq.OpSettling || op.Done != 5000 {
		t.Fatalf("operation did not enqueue every letter: %+v", op)
	}
	if n := b.count(t, `SELECT count(DISTINCT replay_of) FROM jobs`); n != 5000 {
		t.Fatalf("%d letters replayed, want 5000", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A reason is shown on the letter's page and in every audit listing: one
// the size of a log file is refused, for every action, and nothing changes.
func TestReasonsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	id := b.letters(t, 1)[0]
	long := strings.Repeat("é", replay.MaxReasonLength+1) // characters, not bytes
	var verr *dlq.ValidationError
	if _, err := b.svc.Discard(ctx, replay.DiscardRequest{ID: id, Actor: operator, Reason: long}); !errors.As(err, &verr) || verr.Fields["reason"] == "" {
		t.Errorf("discard: %v", err)
	}
	if _, err := b.svc.Replay(ctx, replay.ReplayRequest{ID: id, Actor: operator, Reason: long}); !errors.As(err, &verr) {
		t.Errorf("replay: %v", err)
	}
	f, _ := handlers.ParseFilter(url.Values{"task": {"t.ok"}}, time.Now())
	if _, err := b.svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpDiscard, Actor: operator, Reason: long,
		Selection: dlq.Selection{Filter: &f}}); !errors.As(err, &verr) || verr.Fields["reason"] == "" {
		t.Errorf("bulk discard: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_events`) + b.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatal("a refused reason changed something")
	}
	if _, err := b.svc.Discard(ctx, replay.DiscardRequest{ID: id, Actor: operator, Reason: strings.Repeat("é", replay.MaxReasonLength)}); err != nil {
		t.Fatalf("a reason of exactly the limit: %v", err)
	}
}

// An operation whose batch cannot succeed is stopped as failed, with the
// reason on it, instead of showing "running" forever.
func TestRunnerFailsAnOperationThatKeepsFailing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setup(t)
	b.letters(t, 10)
	runner := replay.NewRunner(replay.RunnerConfig{Store: b.store.Operations, PollInterval: 20 * time.Millisecond})
	svc := replay.NewService(replay.Config{Store: b.store.Operations, Workers: b.store.Queue, Wake: runner.Wake})
	f, _ := handlers.ParseFilter(url.Values{"task": {"t.ok"}}, time.Now())
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Selection: dlq.Selection{Filter: &f},
		RatePerSecond: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A pace no request may set any more, but an older row might hold:
	// every batch's run_at overflows.
	if _, err := b.db.Exec(`UPDATE operations SET rate_per_second = 1e-13 WHERE id = $1`, op.ID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()
	op, err = svc.Wait(ctx, op.ID, 30*time.Second)
	if err != nil || op.State != dlq.OpFailed || op.Error == nil || !strings.Contains(*op.Error, "out of range") {
		t.Fatalf("operation: %+v %v; want failed with the database's reason", op, err)
	}
	if n := b.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Fatalf("%d jobs from batches that failed", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// And the pace that led there is refused up front.
	for _, rate := range []float64{1e-13, -1, math.NaN(), 1e9} {
		_, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Selection: dlq.Selection{Filter: &f},
			RatePerSecond: rate})
		var verr *dlq.ValidationError
		if !errors.As(err, &verr) || verr.Fields["rate_per_second"] == "" {
			t.Errorf("rate %g: %v, want a validation error", rate, err)
		}
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
