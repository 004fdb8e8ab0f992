package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestRollingDeploy sends SIGTERM to each of three workers in turn, the way
// a rolling deploy does, while each runs jobs that fit the shutdown grace
// and jobs that do not. The ones that fit finish, in one attempt. The
// others are handed back at once, not after their lease: when the worker
// has exited they are available again, the attempt given back, and their
// run_at unchanged, so they keep their place ahead of jobs enqueued after
// them. The worker exits within the grace and a little more.
func TestRollingDeploy(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	setupEffects(t, db.DB)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	const grace = 1500 * time.Millisecond
	fit, overlong := size(2, 4), size(2, 4)
	// A long lease: a job handed back only when its lease expired would
	// still be running (or lost) when the checks below look.
	f := newFleet(t, db.DSN, childOpts{Concurrency: fit + overlong, Lease: 20 * time.Second, Grace: grace})
	workers := []string{"deploy-w1", "deploy-w2", "deploy-w3"}
	for _, id := range workers {
		// Each worker its own queue, so that the jobs a SIGTERM interrupts
		// are known, and nobody else takes them over.
		f.setQueues(id, []string{id})
		f.start(id)
	}
	enqueue := func(queue string, ms int) dlq.Job {
		kw, _ := json.Marshal(effectArgs{MS: ms})
		res, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: taskSleep, Queue: queue, Kwargs: kw, MaxAttempts: 3})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job
	}
	var finished, handedBack, terms int
	// The queue whose jobs are waited for: if they never all run, its
	// jobs are shown.
	waitingOn := ""
	t.Cleanup(func() {
		if t.Failed() && waitingOn != "" {
			var states []string
			_ = db.Select(&states, `SELECT id || ' ' || state || ' ' || coalesce(lease_owner, '-') || ' attempt ' || attempt FROM jobs WHERE queue = $1`, waitingOn)
			t.Logf("the jobs of queue %s: %v", waitingOn, states)
		}
	})
	var slowest time.Duration
	for round := range size(1, 3) {
		for _, id := range workers {
			var fits, longs []dlq.Job
			for range fit {
				fits = append(fits, enqueue(id, 700))
			}
			for range overlong {
				longs = append(longs, enqueue(id, int(time.Hour/time.Millisecond)))
			}
			waitingOn = id
			waitFor(t, 60*time.Second, fmt.Sprintf("round %d: %s to run its %d jobs", round, id, fit+overlong), func() bool {
				return count(db.DB, `SELECT count(*) FROM jobs WHERE queue = $1 AND state = 'running' AND lease_owner = $2`,
					id, id) == fit+overlong
			})
			waitingOn = ""
			took, err := f.term(id, grace+10*time.Second)
			terms++
			slowest = max(slowest, took)
			if err != nil {
				t.Fatalf("round %d, %s: %v", round, id, err)
			}
			if took > grace+3*time.Second {
				t.Errorf("round %d, %s took %s to exit after SIGTERM, want about the %s grace", round, id, took, grace)
			}
			for _, j := range fits {
				got, err := store.Queue.Job(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != dlq.StateSucceeded || got.Attempt != 1 {
					t.Errorf("round %d, %s: job %d fit the grace but is %s after %d attempts", round, id, j.ID, got.State, got.Attempt)
				}
				finished++
			}
			for _, j := range longs {
				got, err := store.Queue.Job(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != dlq.StateAvailable || got.LeaseOwner != nil || got.Attempt != 0 {
					t.Errorf("round %d, %s: job %d should be handed back at once (available, no lease, attempt given back), is %s owner %v attempt %d",
						round, id, j.ID, got.State, got.LeaseOwner, got.Attempt)
				}
				if !got.RunAt.Equal(j.RunAt) {
					t.Errorf("round %d, %s: handed-back job %d lost its place in the queue: run_at %s, was %s at enqueue",
						round, id, j.ID, got.RunAt.Format(time.RFC3339Nano), j.RunAt.Format(time.RFC3339Nano))
				}
				handedBack++
			}
			// The deploy's new worker takes the handed-back jobs again.
			f.start(id)
			waitFor(t, 20*time.Second, id+" to take its handed-back jobs again", func() bool {
				return count(db.DB, `SELECT count(*) FROM jobs WHERE queue = $1 AND state = 'running'`, id) == overlong
			})
			// Room for the next round: the overlong jobs would run for an
			// hour. They are test debris now.
			f.kill(id)
			if _, err := db.Exec(`DELETE FROM jobs WHERE queue = $1`, id); err != nil {
				t.Fatal(err)
			}
			f.start(id)
		}
	}
	if t.Failed() {
		return
	}
	figures(t, "deploy", "%d SIGTERMs (grace %s): %d jobs finished within the grace, %d handed back at once keeping their place, slowest exit %s",
		terms, grace, finished, handedBack, slowest.Round(10*time.Millisecond))
}
