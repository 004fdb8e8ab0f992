package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/storetest"
)

// The heartbeat's look for orphaned claims used to hold off claiming for
// as long as its query ran, which under load was seconds at every
// heartbeat, although there is almost never an orphan to find. With
// nothing to hand back, the look must not wait for a claim in flight.
func TestOrphanLookLeavesClaimsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	reg := NewRegistry()
	reg.Register("test.task", func(context.Context, *Job) error { return nil }, TaskOptions{})
	w, err := New(storetest.NewStores(db.DB).Queue, Config{Registry: reg, ID: "look-1", Logger: slog.New(slog.DiscardHandler)})
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

// A claim whose handler ran but whose outcome the worker gave up writing
// (the database refused it, or shutdown's last window closed) is left to
// the rescuer, which spends its attempt. It used to be remembered only
// until its lease ran out, and the hand-back of orphans then took it for
// a claim whose reply was lost: recorded as never run, its attempt given
// back, run again. It must be remembered until the rescuer has taken it.
func TestAGivenUpClaimIsNeverHandedBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	reg := NewRegistry()
	reg.Register("test.task", func(context.Context, *Job) error { return nil }, TaskOptions{})
	w, err := New(storetest.NewStores(db.DB).Queue, Config{Registry: reg, ID: "gave-up-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.register(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.store.RegisterTasks(ctx, []string{"test.task"}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Enqueue(ctx, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	jobs, err := w.store.Claim(ctx, w.cfg.ID, w.cfg.Queues, 10, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %v, %v", jobs, err)
	}
	job := jobs[0]
	// Its handler ran; its outcome was given up, and its lease ran out.
	w.giveUp(dlq.LeaseOf(w.cfg.ID, job), job.AttemptedAt)
	db.MustExec(`UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, job.ID)

	if n := w.handBackOrphans(ctx); n != 0 {
		t.Fatalf("handed back %d jobs; the given-up claim ran and must be left to the rescuer", n)
	}
	if j, err := w.store.Job(ctx, job.ID); err != nil || j.State != dlq.StateRunning || j.Attempt != 1 {
		t.Fatalf("job %+v (%v); want still running on attempt 1", j, err)
	}
	if _, err := w.store.RescueExpired(ctx, 10, "rescuer", time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if j, err := w.store.Job(ctx, job.ID); err != nil || j.State != dlq.StateDead || j.Attempt != 1 {
		t.Fatalf("job %+v (%v); want dead by the rescuer on its one attempt", j, err)
	}
	w.handBackOrphans(ctx)
	if n := len(w.gaveUp); n != 0 {
		t.Fatalf("%d given-up claims remembered after the rescuer took the job; want them forgotten", n)
	}
}

// Past maxGaveUp the oldest given-up claims are forgotten, and the hand-back
// of orphans stops considering claims as old as they are, so that it still
// never hands back a job that ran.
func TestGivenUpClaimsAreBounded(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	reg.Register("test.task", func(context.Context, *Job) error { return nil }, TaskOptions{})
	w, err := New(&queue.Store{}, Config{Registry: reg, ID: "bounded-1", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w.since, w.orphansSince = start, start
	at := func(i int) *time.Time {
		t := start.Add(time.Duration(i) * time.Millisecond)
		return &t
	}
	for i := range maxGaveUp + 1 {
		w.giveUp(dlq.Lease{Worker: w.cfg.ID, JobID: int64(i + 1), Attempt: 1}, at(i))
	}
	_, gaveUp, since := w.claims()
	if len(gaveUp) != maxGaveUp || !since.Equal(at(0).Add(time.Microsecond)) {
		t.Fatalf("%d given-up claims remembered, orphans looked for since %s; want %d, since just after the oldest (%s)",
			len(gaveUp), since, maxGaveUp, at(0))
	}
	if _, ok := w.gaveUp[dlq.Lease{Worker: w.cfg.ID, JobID: 1, Attempt: 1}]; ok {
		t.Fatal("the oldest given-up claim is still remembered")
	}
}
