package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// The heartbeat's look for orphaned claims used to hold off claiming for
// as long as its query ran, which under load was seconds at every
// heartbeat, although there is almost never an orphan to find. With
// nothing to hand back, the look must not wait for a claim in flight.
func TestOrphanLookLeavesClaimsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	reg := NewRegistry()
	reg.Register("test.task", func(context.Context, *Job) error { return nil }, TaskOptions{})
	w, err := New(dlq.NewStore(db.DB), Config{Registry: reg, ID: "look-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	// A job this worker holds, known to it: not an orphan.
	if err := w.store.RegisterTasks(ctx, []string{"test.task"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Enqueue(ctx, dlq.EnqueueParams{Task: "test.task"}); err != nil {
		t.Fatal(err)
	}
	jobs, err := w.store.Claim(ctx, w.cfg.ID, w.cfg.Queues, 10, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	w.active[dlq.LeaseOf(w.cfg.ID, jobs[0])] = &activeJob{job: jobs[0]}

	w.claiming.Lock() // a claim in flight
	done := make(chan int, 1)
	go func() { done <- w.handBackOrphans(ctx) }()
	select {
	case n := <-done:
		w.claiming.Unlock()
		if n != 0 {
			t.Fatalf("handed back %d jobs; the one running is known, not an orphan", n)
		}
	case <-time.After(3 * time.Second):
		w.claiming.Unlock()
		<-done
		t.Fatal("the look for orphans waited for the claim in flight; with nothing to hand back it must not hold up claims")
	}
}
