package web

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestPauseCollector reads a real database: the open pause is exported,
// and so is the age of the oldest job held behind it.
func TestPauseCollector(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	c := newPauseCollector(store.Queue, slog.New(slog.DiscardHandler))
	if got := gather(t, c); len(got) != 0 {
		t.Fatalf("an empty database exports %v", got)
	}
	db.MustExec(`INSERT INTO jobs (task, queue, run_at) VALUES ('payments.charge', 'payments', now() - interval '10 minutes'),
		('payments.charge', 'payments', now() - interval '1 minute'), ('emails.send', 'default', now() + interval '1 hour')`)
	if _, err := store.Queue.PauseWork(ctx, dlq.PauseParams{Kind: dlq.PauseTask, Name: "payments.charge", Reason: "provider down",
		Actor: dlq.Actor{Name: "olga"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, c)
	if got["redrive_paused,kind=task,name=payments.charge"] != 1 {
		t.Errorf("redrive_paused missing: %v", got)
	}
	if age := got["redrive_queue_oldest_waiting_seconds,queue=payments"]; age < 590 || age > 700 {
		t.Errorf("oldest waiting on payments: %.0f s, want about 600: %v", age, got)
	}
	if _, ok := got["redrive_queue_oldest_waiting_seconds,queue=default"]; ok {
		t.Errorf("a queue whose only job is not due yet has an oldest waiting age: %v", got)
	}
}
