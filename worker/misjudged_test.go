package worker_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/internal/localpg"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// TestNoJobMisjudged covers the ways a healthy worker's job used to be
// dead-lettered for a failure it did not have.
func TestNoJobMisjudged(t *testing.T) {
	t.Parallel()

	// A job that succeeds while the database is down (long enough for
	// its outcome write and a renewal of its lease to fail) is recorded
	// as succeeded once it is back, well inside its 10 s lease: the
	// outcome write is retried and the lease kept renewed meanwhile. It
	// used to be written once, fail, and leave the job to the rescuer,
	// which dead-lettered it as lease_expired.
	t.Run("SuccessDuringADatabaseBlipIsRecorded", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		dir, err := os.MkdirTemp("", "redrive-blip-pg-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		cluster, err := localpg.Start(ctx, localpg.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.Stop() })
		db, err := postgres.Open(ctx, cluster.DSN("postgres"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := postgres.Migrate(ctx, db, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		b := &bundle{store: storetest.NewStores(db), reg: worker.NewRegistry(), logs: &syncBuffer{}}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("worker logs:\n%s", b.logs.String())
			}
		})
		if err := b.store.Queue.RegisterTasks(ctx, []string{"test.slow"}); err != nil {
			t.Fatal(err)
		}
		// The work goes on whatever the database does, until the test
		// releases it.
		started, release := make(chan struct{}, 1), make(chan struct{})
		b.reg.Register("test.slow", func(ctx context.Context, job *worker.Job) error {
			started <- struct{}{}
			<-release
			return nil
		}, worker.TaskOptions{})
		released := false
		releaseOnce := func() {
			if !released {
				released = true
				close(release)
			}
		}
		cfg := b.config("blip-1")
		cfg.LeaseDuration, cfg.HeartbeatInterval = 10*time.Second, time.Second
		b.start(t, cfg)
		// Released at the end should the test fail first (cleanups run
		// last registered first: before the worker stops).
		t.Cleanup(releaseOnce)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.slow", MaxAttempts: 1})
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the job did not start")
		}
		if err := cluster.Stop(); err != nil {
			t.Fatal(err)
		}
		// The job succeeds during the outage, and the database stays down
		// until its outcome write and a renewal of its lease have failed.
		releaseOnce()
		waitFor(t, 10*time.Second, "the outcome write and a lease renewal to fail", func() bool {
			logs := b.logs.String()
			return strings.Contains(logs, "writing job outcomes failed") && strings.Contains(logs, "renew leases failed")
		})
		if cluster, err = localpg.Start(ctx, localpg.Config{Dir: dir, Port: cluster.Port()}); err != nil {
			t.Fatal(err)
		}
		var j dlq.Job
		waitFor(t, 20*time.Second, "the job to finish", func() bool {
			var err error
			j, err = b.store.Queue.Job(ctx, id)
			return err == nil && !j.State.ActiveState()
		})
		if j.State != dlq.StateSucceeded || j.Attempt != 1 {
			t.Fatalf("after an outage the job is %s on attempt %d (history %+v); want succeeded on attempt 1",
				j.State, j.Attempt, j.Errors)
		}
	})

	// A claim whose reply never reached the worker (it timed out client
	// side, then committed) leaves jobs running under the worker's id that
	// the worker knows nothing of. The worker hands them back at its next
	// heartbeat without spending their attempt, so they run normally. They
	// used to wait for their leases to expire, and one on its last attempt
	// was dead-lettered as lease_expired without ever running.
	t.Run("JobsOfALostClaimReplyAreHandedBackUnspent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ran := make(chan int64, 4)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			ran <- job.ID
			return nil
		}, worker.TaskOptions{})
		cfg := b.config("orphans-1")
		cfg.LeaseDuration, cfg.HeartbeatInterval = 30*time.Second, 100*time.Millisecond
		cfg.PollInterval = time.Hour // nothing but the hand-back may wake the claim loop
		b.start(t, cfg)
		waitFor(t, 5*time.Second, "the worker to register", func() bool {
			return b.count(t, `SELECT count(*) FROM workers WHERE id = 'orphans-1'`) == 1
		})
		last := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1, RunAt: time.Now().Add(time.Hour)})
		other := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3, RunAt: time.Now().Add(time.Hour)})
		// What the late claim did: both jobs running under this worker's
		// lease, their attempts counted.
		b.db.MustExec(`UPDATE jobs SET state = 'running', attempt = attempt + 1, lease_owner = 'orphans-1',
			lease_expires_at = now() + interval '30 seconds', attempted_at = now(), run_at = now() - interval '1 minute'
			WHERE id = ANY($1)`,
			[]int64{last, other})
		for _, id := range []int64{last, other} {
			j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
			if j.Attempt != 1 {
				t.Errorf("job %d succeeded on attempt %d; the lost claim's attempt must be given back", id, j.Attempt)
			}
			if len(j.Errors) != 1 || j.Errors[0].Class != dlq.ClaimLostClass || j.Errors[0].Outcome != dlq.OutcomeInterrupted {
				t.Errorf("job %d history %+v; want one ClaimLost hand-back", id, j.Errors)
			}
		}
		if n := b.count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Errorf("%d dead letters; want none", n)
		}
		if !strings.Contains(b.logs.String(), "claim reply was lost") {
			t.Error("the hand-back was not logged")
		}
	})
}

// TestAnEarlierProcessesClaimSpendsItsAttempt: a worker restarted under the
// same id (a pod name) finds jobs running under that id that its previous
// process claimed and died running. Those are not lost claim replies: they
// must go through the rescuer and spend their attempt, or a job that kills
// its worker at every pick-up would be handed back for ever.
func TestAnEarlierProcessesClaimSpendsItsAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error { return nil }, worker.TaskOptions{})
	id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
	// The previous process with this id claimed it a minute ago and died.
	b.db.MustExec(`UPDATE jobs SET state = 'running', attempt = 1, lease_owner = 'pod-0',
		lease_expires_at = now() + interval '1 second', attempted_at = now() - interval '1 minute' WHERE id = $1`, id)
	cfg := b.config("pod-0")
	cfg.HeartbeatInterval = 100 * time.Millisecond
	b.start(t, cfg)
	j := b.waitJob(t, id, dlq.StateDead, 10*time.Second)
	if j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Class != dlq.LeaseExpiredClass {
		t.Fatalf("job %+v; want dead on its one attempt, rescued as lease_expired, never handed back", j)
	}
}
