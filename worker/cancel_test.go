package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// TestOperatorCancel: an operator's cancel of a running job stops its
// handler and dead-letters it as cancelled (or retries it, when asked),
// through NOTIFY or, without LISTEN, at the next heartbeat; a handler that
// ignores the cancellation is abandoned as for a timeout.
func TestOperatorCancel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		listen  bool
		ignore  bool
		retry   bool
		want    dlq.State
		maxWait time.Duration
	}{
		{name: "NotifyStopsTheHandlerAndDeadLettersAsCancelled", listen: true, want: dlq.StateDead, maxWait: 5 * time.Second},
		{name: "PollingWorkerLearnsAtItsNextHeartbeat", want: dlq.StateDead, maxWait: 5 * time.Second},
		{name: "RetryWhenTheOperatorChoseIt", listen: true, retry: true, want: dlq.StateRetrying, maxWait: 5 * time.Second},
		{name: "HandlerIgnoringCancellationIsAbandoned", listen: true, ignore: true, want: dlq.StateDead, maxWait: 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t)
			started, stopped := make(chan struct{}, 1), make(chan struct{}, 1)
			release := make(chan struct{})
			defer close(release)
			b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
				started <- struct{}{}
				if c.ignore {
					<-release
					return nil
				}
				<-ctx.Done()
				stopped <- struct{}{}
				return ctx.Err()
			}, worker.TaskOptions{})
			cfg := b.config("w-cancel")
			if c.listen {
				cfg.PollInterval, cfg.ListenDSN = time.Second, b.db.DSN
			}
			b.start(t, cfg)
			if c.listen {
				b.waitListening(t)
			}
			id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3})
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler never started")
			}
			job := b.job(t, id)
			asked := time.Now()
			_, err := b.store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobCancel, ID: id, SeenState: dlq.StateRunning,
				SeenAttempt: &job.Attempt, Actor: dlq.Actor{Name: "alice"}, Reason: "stuck on a dead socket",
				Retry: c.retry, Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if !c.ignore {
				select {
				case <-stopped:
				case <-time.After(c.maxWait):
					t.Fatal("the handler's context was not cancelled")
				}
			}
			got := b.waitJob(t, id, c.want, c.maxWait+5*time.Second)
			if c.listen && !c.ignore && time.Since(asked) > 2*time.Second {
				t.Errorf("the cancel took %s through NOTIFY", time.Since(asked))
			}
			last, _ := got.Errors.Last()
			if last.Class != "Cancelled" || !strings.HasPrefix(last.Message, "cancelled by alice: stuck on a dead socket") {
				t.Errorf("attempt entry %s %q", last.Class, last.Message)
			}
			if c.want == dlq.StateDead {
				letters := b.deadLetters(t, id)
				if len(letters) != 1 || letters[0].Reason != dlq.ReasonCancelled {
					t.Fatalf("letters %+v, want one with reason cancelled", letters)
				}
			}
		})
	}
}

// TestOperatorRunNow: a job scheduled an hour ahead runs as soon as an
// operator asks, on a live worker.
func TestOperatorRunNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	ran := make(chan struct{}, 1)
	b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
		ran <- struct{}{}
		return nil
	}, worker.TaskOptions{})
	cfg := b.config("w-run-now")
	cfg.PollInterval, cfg.ListenDSN = time.Minute, b.db.DSN // only the notification can wake it in time
	b.start(t, cfg)
	b.waitListening(t)
	id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", RunAt: time.Now().Add(time.Hour)})
	select {
	case <-ran:
		t.Fatal("the job ran before its time")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := b.store.Operations.ActOnJob(ctx, dlq.JobActionParams{Action: dlq.JobRunNow, ID: id, SeenState: dlq.StateAvailable,
		SeenAttempt: new(int), Actor: dlq.Actor{Name: "alice"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b.waitJob(t, id, dlq.StateSucceeded, 5*time.Second)
}

// waitListening waits until the worker's LISTEN connection is up: it
// listens to the cancel channel first, so the jobs channel's LISTEN means
// both are.
func (b *bundle) waitListening(t *testing.T) {
	t.Helper()
	waitFor(t, 5*time.Second, "the LISTEN connection", func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = 'LISTEN "redrive_jobs"'`) == 1
	})
}
