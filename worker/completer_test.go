package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestSlowOutcomeWriteDoesNotHoldBackTheNext: outcomes are written by more
// than one writer at once, so a batch whose write is stuck (here on a row
// lock another transaction holds on its job) does not keep the next
// batch's jobs waiting, and their leases running down, behind it. With a
// single writer the second job's success would wait for the first's.
func TestSlowOutcomeWriteDoesNotHoldBackTheNext(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
		var kw struct{ Hold bool }
		if err := json.Unmarshal(job.Kwargs, &kw); err != nil {
			return worker.Permanent(err)
		}
		if kw.Hold {
			started <- struct{}{}
			<-release
		}
		return nil
	}, worker.TaskOptions{})
	cfg := b.config("writers-1")
	cfg.LeaseDuration = 20 * time.Second
	b.start(t, cfg)

	first := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Kwargs: kwargs(map[string]bool{"hold": true})})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first job did not start")
	}
	// Hold the first job's row: its outcome's UPDATE waits on this lock.
	tx, err := b.db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, first); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, 10*time.Second, "the first job's outcome write to wait on the row lock", func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE jobs%' AND datname = current_database()`) > 0
	})

	second := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
	b.waitJob(t, second, dlq.StateSucceeded, 10*time.Second)
	if j := b.job(t, first); j.State != dlq.StateRunning {
		t.Fatalf("first job is %s while its write waits on the lock, want running", j.State)
	}

	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	b.waitJob(t, first, dlq.StateSucceeded, 10*time.Second)
}
