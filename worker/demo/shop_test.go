package demo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/worker"
	"github.com/redrive/redrive/worker/demo"
)

// A seeded letter replayed where `redrive dev` runs must run: its task is
// one of the demo's shop tasks, on a queue dev works. It used to die again
// as UnknownTask, since no worker had the seed's tasks.
func TestSeededLettersReplayOnTheDemoWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	if _, err := seed.DeadLetters(ctx, b.store.Letters, b.store.Groups, 400, time.Now(), seed.Options{}); err != nil {
		t.Fatal(err)
	}
	b.startWorker(t, func(c *worker.Config) { c.Queues = demo.ShopQueues() })

	// One pending letter of every task the seed writes.
	var letters []struct {
		ID   int64  `db:"id"`
		Task string `db:"task"`
	}
	if err := b.db.Select(&letters, `SELECT DISTINCT ON (task) id, task FROM dead_letters WHERE status = 'pending' ORDER BY task, id`); err != nil {
		t.Fatal(err)
	}
	if len(letters) != len(demo.ShopTaskNames()) {
		t.Fatalf("pending letters of %d tasks, want one of each of the %d shop tasks: %v", len(letters), len(demo.ShopTaskNames()), letters)
	}
	svc := replay.NewService(replay.Config{Store: b.store.Operations, Workers: b.store.Queue})
	operator := replay.Actor{Actor: dlq.Actor{Name: "ana"}, Role: dlq.RoleOperator}
	for _, l := range letters {
		res, err := svc.Replay(ctx, replay.ReplayRequest{ID: l.ID, Actor: operator, Reason: "demo", Key: fmt.Sprint("replay-", l.ID)})
		if err != nil {
			t.Fatalf("replay letter %d (%s): %v", l.ID, l.Task, err)
		}
		b.wait(t, res.JobID, dlq.StateSucceeded)
	}
}
