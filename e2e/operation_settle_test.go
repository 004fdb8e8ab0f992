package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// TestOperationSettles follows a bulk replay in the browser with a real
// worker: the letters are handed to the queue at once, the replays run one
// at a time, and the page stays "settling" until the last one ran, with
// the second bar filling and the replays that died again counted; the
// audit entry then says what became of each letter.
func TestOperationSettles(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ids := actionLetters(t, db, 12, "billing.charge")
	// Test letters name job ids of their own; a replay that dies again
	// becomes a letter naming its job, which must not be one of theirs.
	if _, err := db.Exec(`SELECT setval(pg_get_serial_sequence('jobs', 'id'), 1000000)`); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	store := storetest.NewStores(db.DB)
	// The fix works for most orders; every fourth still fails, for good.
	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(ctx context.Context, j *worker.Job) error {
		var args []json.RawMessage
		var n int
		if json.Unmarshal(j.Args, &args) != nil || len(args) == 0 || json.Unmarshal(args[0], &n) != nil {
			return worker.Permanent(errors.New("unreadable args"))
		}
		select { // slow enough to watch
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(400 * time.Millisecond):
		}
		if n%4 == 0 {
			return worker.Permanent(fmt.Errorf("CardDeclined: card declined for order %d, again", n))
		}
		return nil
	}, worker.TaskOptions{})
	if err := store.Queue.RegisterTasks(context.Background(), actionTasks); err != nil {
		t.Fatal(err)
	}
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: store.DB, Logger: logger, Version: "e2e", RunnerPollInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- redrive.RunWorker(ctx, store.DB, worker.Config{Registry: reg, Queues: []string{"payments"}, Concurrency: 1,
			PollInterval: 50 * time.Millisecond, ShutdownGrace: time.Second, Logger: logger})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})

	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err := page.Goto(base + "/dead-letters?task=billing.charge")
	must(t, err)
	must(t, byTestID(page, "select-all-matching").Check())
	must(t, byTestID(page, "bulk-replay").Click())
	must(t, byTestID(page, "confirm-reason").Fill("card processor fixed in v1.4.3"))
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))

	// Every letter is in the queue long before the replays have run: the
	// operation says so, and is not done.
	must(t, expect.Locator(byTestID(page, "op-count")).ToHaveText("12 of 12 handled · 100%"))
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Settling: replays still running"))
	must(t, expect.Locator(byTestID(page, "op-settled-count")).ToContainText(regexp.MustCompile(`^([1-9]|1[01]) of 12 settled`)))
	must(t, expect.Locator(byTestID(page, "stop-following")).ToHaveCount(1))
	screenshot(t, page, "operation-settling")

	// Then the last replay runs: done, three died again, nine succeeded.
	slow := playwright.LocatorAssertionsToHaveTextOptions{Timeout: playwright.Float(45_000)}
	must(t, expect.Locator(byTestID(page, "op-state")).ToHaveText("Done", slow))
	must(t, expect.Locator(byTestID(page, "op-settled-count")).ToHaveText("12 of 12 settled · 100%"))
	must(t, expect.Locator(byTestID(page, "replays-succeeded")).ToHaveText("9 succeeded"))
	must(t, expect.Locator(byTestID(page, "replays-died-again")).ToHaveText("3 died again (new dead letters)"))
	must(t, expect.Locator(byTestID(page, "stop-following")).ToHaveCount(0))
	screenshot(t, page, "operation-settled")

	// The audit entry's "status now": what became of each replay.
	must(t, byTestID(page, "op-letters").Click())
	statuses := page.Locator(`[data-testid="entry-letter-status"]`)
	must(t, expect.Locator(statuses).ToHaveCount(12))
	var reborn int64
	must(t, db.Get(&reborn, `SELECT id FROM dead_letters WHERE replay_of = $1`, ids[3]))
	fourth := page.Locator(`[data-testid="entry-letter"]`).Nth(3).Locator(`[data-testid="entry-letter-status"] a`)
	must(t, expect.Locator(fourth).ToHaveText(fmt.Sprintf("died again as letter %d", reborn)))
	must(t, expect.Locator(page.Locator(`[data-testid="entry-letter"]`).First().Locator(`[data-testid="entry-letter-status"]`)).ToHaveText("replay succeeded"))
	screenshot(t, page, "audit-entry-status-now")
	must(t, fourth.Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(fmt.Sprintf(`/dead-letters/%d$`, reborn))))
}

// TestFollowThroughWithARealWorker: a bulk replay's counts go from
// waiting to succeeded and died again as a real worker runs its jobs, and
// the operation is done only once the last one settled (no browser).
func TestFollowThroughWithARealWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := storetest.NewDB(t)
	actionLetters(t, db, 200, "billing.charge")
	if _, err := db.Exec(`SELECT setval(pg_get_serial_sequence('jobs', 'id'), 1000000)`); err != nil {
		t.Fatal(err)
	}
	store := storetest.NewStores(db.DB)
	passes := &countingOperationStore{Store: store.Operations}
	runner := replay.NewRunner(replay.RunnerConfig{Store: passes, PollInterval: 20 * time.Millisecond})
	svc := replay.NewService(replay.Config{Store: store.Operations, Workers: store.Queue, Wake: runner.Wake})
	errs := make(chan error, 2)
	go func() { errs <- runner.Run(ctx) }()

	f, _ := handlers.ParseFilter(url.Values{"task": {"billing.charge"}}, time.Now())
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Selection: dlq.Selection{Filter: &f},
		Actor: replay.Actor{Actor: dlq.Actor{Name: "olga"}, Role: dlq.RoleOperator}})
	if err != nil {
		t.Fatal(err)
	}
	// Enqueued, none run: settling, and it stays so while nothing runs.
	storetest.WaitFor(t, 30*time.Second, "the operation to settle", func() bool {
		op, err = store.Operations.Operation(ctx, op.ID)
		must(t, err)
		return op.State == dlq.OpSettling && op.Replays != nil
	})
	// Three more of each of the runner's passes, so that at least two of
	// each began after the look above and the first ran to its end.
	runs, follows := passes.runs.Load()+3, passes.follows.Load()+3
	storetest.WaitFor(t, 30*time.Second, "three more passes of the runner", func() bool {
		return passes.runs.Load() >= runs && passes.follows.Load() >= follows
	})
	if op, _ = store.Operations.Operation(ctx, op.ID); op.State != dlq.OpSettling || op.Replays == nil || *op.Replays != (dlq.ReplayCounts{Waiting: 200}) {
		t.Fatalf("before any worker: %s, replays %+v; want settling, 200 waiting", op.State, op.Replays)
	}

	// The fix works, except for every tenth job.
	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(_ context.Context, j *worker.Job) error {
		if j.ID%10 == 0 {
			return worker.Permanent(errors.New("still broken"))
		}
		return nil
	}, worker.TaskOptions{})
	go func() {
		errs <- redrive.RunWorker(ctx, store.DB, worker.Config{Registry: reg, Queues: []string{"payments"}, Concurrency: 4,
			PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second})
	}()
	op, err = svc.Wait(ctx, op.ID, 60*time.Second)
	if err != nil || op.State != dlq.OpDone {
		t.Fatalf("operation %+v %v; want done once every replay ran", op, err)
	}
	want := dlq.ReplayCounts{Succeeded: 180, DiedAgain: 20}
	if c, err := store.Operations.OperationReplays(ctx, op.ID); err != nil || c != want || op.Replays == nil || *op.Replays != want {
		t.Fatalf("replays %+v (kept %+v) %v; want %+v", c, op.Replays, err, want)
	}
	if n := countRows(t, db, `SELECT count(*) FROM dead_letters WHERE replay_of IS NOT NULL AND status = 'pending'`); n != 20 {
		t.Fatalf("%d new dead letters, want 20", n)
	}
	var counts json.RawMessage
	must(t, db.Get(&counts, `SELECT counts FROM audit_events WHERE operation_id = $1 AND action = 'bulk_finish'`, op.ID))
	var m map[string]int64
	if json.Unmarshal(counts, &m) != nil || m["succeeded"] != 180 || m["died_again"] != 20 || m["replayed"] != 200 {
		t.Fatalf("closing entry counts %s", counts)
	}
	cancel()
	for range 2 {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("runner or worker: %v", err)
		}
	}
}

// countingOperationStore counts the replay runner's passes: its looks for
// operations to run (each followed by a run of what it found) and its
// counts of the replays in flight.
type countingOperationStore struct {
	*operations.Store
	runs, follows atomic.Int64
}

func (s *countingOperationStore) RunnableOperations(ctx context.Context) ([]int64, error) {
	defer s.runs.Add(1)
	return s.Store.RunnableOperations(ctx)
}

func (s *countingOperationStore) FollowOperations(ctx context.Context, now time.Time) (int, error) {
	defer s.follows.Add(1)
	return s.Store.FollowOperations(ctx, now)
}
