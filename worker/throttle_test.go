package worker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// throttle sets a throttle through the store, as the console and the API do.
func (b *bundle) throttle(t *testing.T, kind, name string, maxRunning *int, perSecond *float64) dlq.Throttle {
	t.Helper()
	res, err := b.store.Queue.SetThrottle(context.Background(), dlq.ThrottleParams{Kind: kind, Name: name,
		MaxRunning: maxRunning, MaxPerSecond: perSecond, Reason: "provider struggling", Actor: dlq.Actor{Name: "alice"}, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return res.Throttle
}

// sampleRunning reads, every few milliseconds until stop is closed, how
// many jobs of task the database has running, and returns the most it
// saw. Each read is one snapshot of the table: what every worker's claim
// counted against.
func (b *bundle) sampleRunning(t *testing.T, task string, stop <-chan struct{}) func() int {
	var (
		mu   sync.Mutex
		most int
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var n int
			if err := b.db.Get(&n, `SELECT count(*) FROM jobs WHERE task = $1 AND state = 'running'`, task); err != nil {
				t.Errorf("sample running jobs: %v", err)
				return
			}
			mu.Lock()
			most = max(most, n)
			mu.Unlock()
		}
	}()
	return func() int {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// TestThrottleAcrossProcesses runs three worker processes, each able to
// run ten jobs at once, against one throttled task, and checks the limits
// hold across all of them from the database.
func TestThrottleAcrossProcesses(t *testing.T) {
	t.Parallel()

	t.Run("NeverMoreThanMaxRunningAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const limit, jobs = 3, 36
		n := limit
		b.throttle(t, dlq.PauseTask, "test.sleep", &n, nil)
		ids := make([]int64, jobs)
		for i := range ids {
			ids[i] = b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 150})})
		}
		// Jobs of another task on the same queue are not held back.
		other := b.enqueue(t, dlq.EnqueueParams{Task: "test.hang_first_attempt", IdempotencyKey: "other"})
		stop := make(chan struct{})
		most := b.sampleRunning(t, "test.sleep", stop)
		for i := range 3 {
			startChild(t, b, fmt.Sprintf("child-throttled-%d", i), childOpts{lease: 5 * time.Second, grace: time.Second, concurrency: 10})
		}
		waitFor(t, 10*time.Second, "the other task's job to start", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND state = 'running'`, other) == 1
		})
		for _, id := range ids {
			b.waitJob(t, id, dlq.StateSucceeded, 60*time.Second)
		}
		close(stop)
		got := most()
		if got > limit {
			t.Fatalf("the database had %d jobs of the task running at once, want at most %d", got, limit)
		}
		if got < limit {
			t.Fatalf("at most %d ran at once, want the limit (%d) used", got, limit)
		}
		t.Logf("%d jobs, at most %d running at once (limit %d)", jobs, got, limit)
	})

	t.Run("NeverMoreStartsThanTheRate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const jobs = 20
		rate := 5.0
		b.throttle(t, dlq.PauseTask, "test.sleep", nil, &rate)
		ids := make([]int64, jobs)
		for i := range ids {
			ids[i] = b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 1})})
		}
		for i := range 3 {
			startChild(t, b, fmt.Sprintf("child-rate-%d", i), childOpts{lease: 5 * time.Second, grace: time.Second, concurrency: 10})
		}
		for _, id := range ids {
			b.waitJob(t, id, dlq.StateSucceeded, 60*time.Second)
		}
		var starts []time.Time
		if err := b.db.Select(&starts, `SELECT attempted_at FROM jobs WHERE task = 'test.sleep' ORDER BY attempted_at`); err != nil {
			t.Fatal(err)
		}
		// A bucket of 5 tokens gaining 5 a second: any second holds at
		// most the 5 saved up and the 5 it earns.
		for i := range starts {
			j := i
			for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
				j++
			}
			if j-i > 10 {
				t.Fatalf("%d starts within a second from %s, want at most 10 at 5 a second", j-i, starts[i].Format(time.StampMilli))
			}
		}
		// 20 starts: 5 at once, then 15 at 5 a second, 3 s at least.
		span := starts[len(starts)-1].Sub(starts[0])
		if span < 2800*time.Millisecond {
			t.Fatalf("20 starts took %s, want at least 3 s at 5 a second after a burst of 5", span)
		}
		if span > 8*time.Second {
			t.Fatalf("20 starts took %s: the workers left the rate unused", span)
		}
		t.Logf("%d starts over %s at a limit of %g a second", jobs, span, rate)
	})
}
