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

// startsOver looks, by the database's clocks, for a job of task started
// after since while limit of its jobs were running: each job's claim and
// outcome record the now() of their transactions, which began before they
// committed. It says which, or "" for none.
func (b *bundle) startsOver(t *testing.T, task string, limit int, since time.Time) string {
	t.Helper()
	var over []struct {
		ID      int64     `db:"id"`
		At      time.Time `db:"attempted_at"`
		Running int       `db:"running"`
	}
	if err := b.db.Select(&over, `
		SELECT j.id, j.attempted_at, (SELECT count(*) FROM jobs k WHERE k.task = j.task
			AND k.attempted_at <= j.attempted_at AND (k.finished_at IS NULL OR k.finished_at > j.attempted_at)) AS running
		FROM jobs j WHERE j.task = $1 AND j.attempted_at > $2
		ORDER BY running DESC, j.attempted_at LIMIT 1`, task, since); err != nil {
		t.Fatal(err)
	}
	if len(over) == 1 && over[0].Running > limit {
		return fmt.Sprintf("job %d started at %s with %d jobs of the task running, itself included; want at most %d",
			over[0].ID, over[0].At.Format(time.StampMicro), over[0].Running, limit)
	}
	return ""
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
		assertLimitUsed(t, got, limit)
		t.Logf("%d jobs, at most %d running at once (limit %d)", jobs, got, limit)
	})

	// Seven slots shared by three processes of ten slots each: the shares
	// (3, 2, 2 once settled) add up to the limit and never past it.
	t.Run("SharedLimitIsReachedNeverPassed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const limit, jobs = 7, 70
		n := limit
		b.throttle(t, dlq.PauseTask, "test.sleep", &n, nil)
		ids := make([]int64, jobs)
		for i := range ids {
			ids[i] = b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 200})})
		}
		stop := make(chan struct{})
		most := b.sampleRunning(t, "test.sleep", stop)
		for i := range 3 {
			startChild(t, b, fmt.Sprintf("child-shared-%d", i), childOpts{lease: 5 * time.Second, grace: time.Second, concurrency: 10})
		}
		for _, id := range ids {
			b.waitJob(t, id, dlq.StateSucceeded, 60*time.Second)
		}
		close(stop)
		got := most()
		assertLimitUsed(t, got, limit)
		if over := b.startsOver(t, "test.sleep", limit, time.Time{}); over != "" {
			t.Fatal(over)
		}
		// The same look finds the starts that filled the limit.
		if b.startsOver(t, "test.sleep", limit-1, time.Time{}) == "" {
			t.Fatalf("no job started with %d running: the look at the starts sees nothing", limit)
		}
		t.Logf("%d jobs, at most %d running at once (limit %d)", jobs, got, limit)
	})

	// An operator lowers the limit while the processes run at the old
	// one: no job starts after the change while as many as the new limit
	// run, whatever the grants said before it.
	t.Run("LoweredLimitBindsTheNextClaim", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const before, after, jobs = 9, 2, 40
		n := before
		th := b.throttle(t, dlq.PauseTask, "test.sleep", &n, nil)
		for range jobs {
			b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 150})})
		}
		for i := range 3 {
			startChild(t, b, fmt.Sprintf("child-lowered-%d", i), childOpts{lease: 5 * time.Second, grace: time.Second, concurrency: 10})
		}
		waitFor(t, 20*time.Second, "the old limit to be used", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE task = 'test.sleep' AND state = 'running'`) >= before-1
		})
		m := after
		res, err := b.store.Queue.SetThrottle(context.Background(), dlq.ThrottleParams{ID: th.ID, MaxRunning: &m,
			Reason: "provider struggling more", Actor: dlq.Actor{Name: "bob"}, Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "every job to succeed", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE task = 'test.sleep' AND state <> 'succeeded'`) == 0
		})
		if over := b.startsOver(t, "test.sleep", after, *res.Throttle.ChangedAt); over != "" {
			t.Fatal(over)
		}
		started := b.count(t, `SELECT count(*) FROM jobs WHERE task = 'test.sleep' AND attempted_at > $1`, *res.Throttle.ChangedAt)
		if started == 0 {
			t.Fatal("no job started after the change: nothing was checked")
		}
		t.Logf("%d of %d jobs started after the limit went from %d to %d, none past it", started, jobs, before, after)
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

// assertLimitUsed fails unless most, the most jobs of a task seen running
// at once, is the throttle's limit: reached, and never passed.
func assertLimitUsed(t *testing.T, most, limit int) {
	t.Helper()
	if most > limit {
		t.Fatalf("the database had %d jobs of the task running at once, want at most %d", most, limit)
	}
	if most < limit {
		t.Fatalf("at most %d ran at once, want the limit (%d) used", most, limit)
	}
}
