package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/worker"
)

// waitState polls an operation until it is in state want.
func waitState(t *testing.T, store *dlq.Store, id int64, want dlq.OperationState) dlq.Operation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := store.Operation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if op.State == want {
			return op
		}
		if time.Now().After(deadline) {
			t.Fatalf("operation %d is %s after 30s, want %s", id, op.State, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFollowThroughWithARealWorker: a bulk replay's counts go from
// waiting to succeeded and died again as a real worker runs its jobs, and
// the operation is done only once the last one settled.
func TestFollowThroughWithARealWorker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setup(t)
	b.letters(t, 200)
	runner := replay.NewRunner(replay.RunnerConfig{Store: b.store, PollInterval: 20 * time.Millisecond})
	svc := replay.NewService(replay.Config{Store: b.store, Wake: runner.Wake})
	errs := make(chan error, 2)
	go func() { errs <- runner.Run(ctx) }()

	f, _ := dlq.ParseFilter(url.Values{"task": {"t.ok"}}, time.Now())
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	op = waitState(t, b.store, op.ID, dlq.OpSettling)
	// Enqueued, none run: settling, and it stays so while nothing runs.
	time.Sleep(200 * time.Millisecond)
	if op, _ = b.store.Operation(ctx, op.ID); op.State != dlq.OpSettling || op.Replays == nil || *op.Replays != (dlq.ReplayCounts{Waiting: 200}) {
		t.Fatalf("before any worker: %s, replays %+v; want settling, 200 waiting", op.State, op.Replays)
	}

	// The fix works, except for every tenth job.
	reg := worker.NewRegistry()
	reg.Register("t.ok", func(_ context.Context, j *worker.Job) error {
		if j.ID%10 == 0 {
			return worker.Permanent(errors.New("still broken"))
		}
		return nil
	}, worker.TaskOptions{})
	wk, err := worker.New(b.store, worker.Config{Registry: reg, Concurrency: 4, PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() { errs <- wk.Run(ctx) }()
	op, err = svc.Wait(ctx, op.ID, 60*time.Second)
	if err != nil || op.State != dlq.OpDone {
		t.Fatalf("operation %+v %v; want done once every replay ran", op, err)
	}
	want := dlq.ReplayCounts{Succeeded: 180, DiedAgain: 20}
	if c, err := b.store.OperationReplays(ctx, op.ID); err != nil || c != want || op.Replays == nil || *op.Replays != want {
		t.Fatalf("replays %+v (kept %+v) %v; want %+v", c, op.Replays, err, want)
	}
	if n := b.count(t, `SELECT count(*) FROM dead_letters WHERE replay_of IS NOT NULL AND status = 'pending'`); n != 20 {
		t.Fatalf("%d new dead letters, want 20", n)
	}
	var counts json.RawMessage
	if err := b.db.Get(&counts, `SELECT counts FROM audit_events WHERE operation_id = $1 AND action = 'bulk_finish'`, op.ID); err != nil {
		t.Fatal(err)
	}
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
