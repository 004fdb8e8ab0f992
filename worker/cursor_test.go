package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestAJobDueBeforeTheClaimedOnesRuns: claims walk each queue on from
// where the last one ended, so a job due before that point (an enqueue
// that committed late, a rescued job, a past run_at) is not on the walk.
// It still runs: after a claim that comes back short, and at least every
// poll interval while a backlog keeps the claims full.
func TestAJobDueBeforeTheClaimedOnesRuns(t *testing.T) {
	t.Parallel()

	t.Run("OnceTheQueueLooksDrained", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
		cfg := b.config("w-cursor-short")
		cfg.PollInterval = time.Minute // only a claim from the head can find it
		cfg.ListenDSN = b.db.DSN
		b.start(t, cfg)
		b.waitListening(t)
		// The last claim took this job: the next walks on after it.
		warm := b.enqueue(t, dlq.EnqueueParams{Task: "test.task"})
		b.waitJob(t, warm, dlq.StateSucceeded, 5*time.Second)
		late := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", RunAt: time.Now().Add(-time.Hour)})
		b.waitJob(t, late, dlq.StateSucceeded, 5*time.Second)
	})

	t.Run("WhileABacklogKeepsTheClaimsFull", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			time.Sleep(10 * time.Millisecond) // on purpose: each job works for 10 ms, so that the backlog lasts
			return nil
		}, worker.TaskOptions{})
		// 2 slots of 10 ms jobs: 3,000 of them keep it busy for 15 s.
		b.db.MustExec(`INSERT INTO jobs (task) SELECT 'test.task' FROM generate_series(1, 3000)`)
		cfg := b.config("w-cursor-backlog")
		cfg.Concurrency = 2
		cfg.PollInterval = 300 * time.Millisecond
		b.start(t, cfg)
		waitFor(t, 5*time.Second, "the backlog to start", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE state = 'succeeded'`) >= 20
		})
		late := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", RunAt: time.Now().Add(-time.Hour)})
		enqueued := time.Now()
		b.waitJob(t, late, dlq.StateSucceeded, 5*time.Second)
		waiting := b.count(t, `SELECT count(*) FROM jobs WHERE state = 'available'`)
		t.Logf("ran %s after enqueue, %d of the backlog still waiting", time.Since(enqueued), waiting)
		if waiting == 0 {
			t.Fatal("the backlog drained first: the late job waited for it")
		}
	})
}
