package seed_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// A seeded letter replayed where `redrive dev` runs must run: its task is
// one of the demo's, on a queue dev works. It used to die again at once as
// UnknownTask, since no worker had the seed's tasks.
func TestSeededLettersReplayOnTheDemoWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	if _, err := seed.DeadLetters(ctx, store, 400, time.Now()); err != nil {
		t.Fatal(err)
	}
	reg := worker.NewRegistry()
	demo.Register(reg, db.DB)
	if err := store.RegisterTasks(ctx, reg.Tasks()); err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(store, worker.Config{
		Registry: reg, ID: "seed-test", Queues: demo.ShopQueues(), Concurrency: 8,
		LeaseDuration: 5 * time.Second, PollInterval: 20 * time.Millisecond, ShutdownGrace: time.Second,
		RetryPolicy: worker.RetryPolicy{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond, RandFunc: func() float64 { return 1 }},
		Logger:      slog.New(slog.DiscardHandler), Version: "seed-test",
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})

	// One pending letter of every task the seed writes.
	var letters []struct {
		ID   int64  `db:"id"`
		Task string `db:"task"`
	}
	if err := db.Select(&letters, `SELECT DISTINCT ON (task) id, task FROM dead_letters WHERE status = 'pending' ORDER BY task, id`); err != nil {
		t.Fatal(err)
	}
	if len(letters) != len(demo.ShopTaskNames()) {
		t.Fatalf("pending letters of %d tasks, want one of each of the %d shop tasks: %v", len(letters), len(demo.ShopTaskNames()), letters)
	}
	svc := replay.NewService(replay.Config{Store: store})
	operator := replay.Actor{Actor: dlq.Actor{Name: "ana"}, Role: dlq.RoleOperator}
	jobs := map[int64]string{}
	for _, l := range letters {
		res, err := svc.Replay(ctx, replay.ReplayRequest{ID: l.ID, Actor: operator, Reason: "demo", Key: fmt.Sprint("replay-", l.ID)})
		if err != nil {
			t.Fatalf("replay letter %d (%s): %v", l.ID, l.Task, err)
		}
		jobs[res.JobID] = l.Task
	}
	deadline := time.Now().Add(15 * time.Second)
	for id, task := range jobs {
		for {
			j, err := store.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == dlq.StateSucceeded {
				break
			}
			if j.State == dlq.StateDead || time.Now().After(deadline) {
				var class string
				_ = db.Get(&class, `SELECT error_class FROM dead_letters WHERE job_id = $1`, id)
				t.Fatalf("the replay of a %s letter is %s (%s), want succeeded", task, j.State, class)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
