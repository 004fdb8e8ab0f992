package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestSlowDeadLetterWriteHoldsBackNothing: a batch of dead letters whose
// write is stuck (here on a row lock another transaction holds on its job)
// keeps neither the next dead letters nor the successes waiting, their
// leases running down, behind it: dead letters have two writers, and each
// kind of outcome its own lane. With a single writer both jobs below would
// wait for the first one's write.
func TestSlowDeadLetterWriteHoldsBackNothing(t *testing.T) {
	t.Parallel()
	for _, next := range []struct {
		name  string
		fail  bool
		state dlq.State
	}{
		{"NextDeadLetter", true, dlq.StateDead},
		{"NextSuccess", false, dlq.StateSucceeded},
	} {
		t.Run(next.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
				var kw struct{ Hold, Fail bool }
				if err := json.Unmarshal(job.Kwargs, &kw); err != nil {
					return worker.Permanent(err)
				}
				if kw.Hold {
					started <- struct{}{}
					<-release
				}
				if kw.Fail {
					return worker.Permanent(errors.New("card declined"))
				}
				return nil
			}, worker.TaskOptions{})
			cfg := b.config("writers-1")
			cfg.LeaseDuration = 20 * time.Second
			b.start(t, cfg)

			first := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Kwargs: kwargs(map[string]bool{"hold": true, "fail": true})})
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the first job did not start")
			}
			// Hold the first job's row: its dead letter's UPDATE waits on this lock.
			tx, err := b.db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, first); err != nil {
				t.Fatal(err)
			}
			close(release)
			waitFor(t, 10*time.Second, "the first job's dead-letter write to wait on the row lock", func() bool {
				return b.count(t, `SELECT count(*) FROM pg_stat_activity
					WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE jobs%' AND datname = current_database()`) > 0
			})

			second := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", Kwargs: kwargs(map[string]bool{"fail": next.fail})})
			b.waitJob(t, second, next.state, 10*time.Second)
			if j := b.job(t, first); j.State != dlq.StateRunning {
				t.Fatalf("first job is %s while its write waits on the lock, want running", j.State)
			}

			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			b.waitJob(t, first, dlq.StateDead, 10*time.Second)
			if dls := b.deadLetters(t, first); len(dls) != 1 || dls[0].Reason != dlq.ReasonPermanent || dls[0].ErrorMessage != "card declined" {
				t.Fatalf("first job's letters = %+v, want one permanent letter saying card declined", dls)
			}
		})
	}
}
