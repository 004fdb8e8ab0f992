package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func TestForgetVanishedWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	_, err := db.Exec(`
		INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, in_flight, heartbeat_at) VALUES
			('live', 'h1', 1, 'v1', '{default}', '{t}', 4, 0, now()),
			('stale-minutes', 'h2', 2, 'v1', '{default}', '{t}', 4, 0, now() - interval '10 minutes'),
			('gone', 'h3', 3, 'v1', '{default}', '{t}', 4, 0, now() - interval '2 hours'),
			('gone-holding-a-lease', 'h4', 4, 'v1', '{default}', '{t}', 4, 1, now() - interval '2 hours');
		INSERT INTO jobs (task, state, attempt, lease_owner, lease_expires_at)
			VALUES ('t', 'running', 1, 'gone-holding-a-lease', now() - interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := store.Queue.ForgetVanishedWorkers(ctx)
	if err != nil || n != 1 {
		t.Fatalf("forgot %d workers, err %v; want 1", n, err)
	}
	var left []string
	if err := db.Select(&left, `SELECT id FROM workers ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// A stale worker stays in view for an hour; one whose expired lease
	// the rescuer has yet to read stays until it has.
	want := []string{"gone-holding-a-lease", "live", "stale-minutes"}
	if len(left) != len(want) || left[0] != want[0] || left[1] != want[1] || left[2] != want[2] {
		t.Fatalf("workers left %v, want %v", left, want)
	}
}

// Workers and producers start together (make run starts both at once): the
// same tasks registered at the same moment in opposite orders must not
// deadlock, and a name listed twice is one task.
func TestRegisterTasksConcurrentlyInAnyOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("task.%03d", i)
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	g, gctx := errgroup.WithContext(ctx)
	for round := range 8 {
		g.Go(func() error {
			if round%2 == 0 {
				return store.Queue.RegisterWorker(gctx, dlq.WorkerInfo{ID: fmt.Sprint("w", round), Host: "h", Version: "v1",
					Queues: []string{"default"}, Tasks: append(slices.Clone(names), names[0]), Concurrency: 1})
			}
			return store.Queue.RegisterTasks(gctx, reversed)
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("register tasks concurrently: %v", err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM tasks WHERE name LIKE 'task.%'`); err != nil || n != len(names) {
		t.Fatalf("%d tasks registered (err %v), want %d", n, err, len(names))
	}
}
