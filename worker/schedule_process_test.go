package worker_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

// scheduleName is the schedule the children of the schedule tests register.
const scheduleName = "test.every"

// TestScheduleRacingProcesses runs one schedule in three worker processes
// at once, every second for several seconds, and counts the jobs of each
// occurrence: exactly one each, none missed between the first and the
// last.
func TestScheduleRacingProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const every = time.Second
	var children []*child
	for i := range 3 {
		children = append(children, startChild(t, b, fmt.Sprintf("child-sched-%d", i),
			childOpts{lease: 2 * time.Second, grace: time.Second, concurrency: 2, schedule: every}))
	}
	const want = 6
	waitFor(t, 20*time.Second, fmt.Sprintf("%d occurrences to run", want), func() bool {
		return b.count(t, `SELECT count(DISTINCT idempotency_key) FROM jobs WHERE state = 'succeeded' AND idempotency_key LIKE 'periodic:%'`) >= want
	})
	for _, c := range children {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range children {
		if err := c.wait(t, 15*time.Second); err != nil {
			t.Fatalf("child %s: %v", c.id, err)
		}
	}

	type occurrence struct {
		Key  string `db:"idempotency_key"`
		Jobs int    `db:"jobs"`
	}
	var occs []occurrence
	if err := b.db.Select(&occs, `SELECT idempotency_key, count(*) AS jobs FROM jobs WHERE task = 'test.sleep'
		GROUP BY idempotency_key ORDER BY idempotency_key`); err != nil {
		t.Fatal(err)
	}
	if len(occs) < want {
		t.Fatalf("%d occurrences, want at least %d: %v", len(occs), want, occs)
	}
	first, err := time.Parse(time.RFC3339, occs[0].Key[len("periodic:"+scheduleName+":"):])
	if err != nil {
		t.Fatalf("key %q: %v", occs[0].Key, err)
	}
	for i, o := range occs {
		if wantKey := dlq.ScheduleKey(scheduleName, first.Add(time.Duration(i)*every)); o.Key != wantKey {
			t.Errorf("occurrence %d is %s, want %s: an occurrence was missed", i, o.Key, wantKey)
		}
		if o.Jobs != 1 {
			t.Errorf("occurrence %s has %d jobs, want exactly 1", o.Key, o.Jobs)
		}
	}
	if runs := b.count(t, `SELECT count(*) FROM schedule_runs WHERE schedule = $1`, scheduleName); runs != len(occs) {
		t.Errorf("%d runs recorded for %d occurrences", runs, len(occs))
	}
	t.Logf("%d occurrences, each enqueued once by one of 3 racing workers", len(occs))
}

// TestScheduleDisabledEnqueuesNothing disables a schedule while a worker
// runs it, then enables it again: nothing is enqueued meanwhile, nothing
// is made up after, and the worker goes on.
func TestScheduleDisabledEnqueuesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	registerTestTasks(b.reg)
	b.reg.Schedule(scheduleName, worker.Schedule{Every: time.Second, Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 1})})
	b.start(t, b.config("w-sched"))
	jobs := func() int { return b.count(t, `SELECT count(*) FROM jobs WHERE task = 'test.sleep'`) }
	waitFor(t, 10*time.Second, "a first occurrence", func() bool { return jobs() >= 1 })

	ctx := context.Background()
	actor := dlq.Actor{Name: "alice"}
	if _, err := b.store.Queue.SetScheduleEnabled(ctx, dlq.ScheduleChangeParams{Name: scheduleName, Reason: "noisy", Actor: actor, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	before := jobs()
	var next time.Time
	if err := b.db.Get(&next, `SELECT next_run_at FROM schedules WHERE name = $1`, scheduleName); err != nil {
		t.Fatal(err)
	}
	// Three occurrences pass while it is disabled: the worker moves the
	// schedule on without enqueuing them.
	waitFor(t, 10*time.Second, "three occurrences to pass", func() bool {
		var now time.Time
		_ = b.db.Get(&now, `SELECT next_run_at FROM schedules WHERE name = $1`, scheduleName)
		return now.Sub(next) >= 3*time.Second
	})
	if got := jobs(); got != before {
		t.Fatalf("%d jobs enqueued while the schedule was disabled", got-before)
	}
	enabledAt := time.Now()
	if _, err := b.store.Queue.SetScheduleEnabled(ctx, dlq.ScheduleChangeParams{Name: scheduleName, Enabled: true, Reason: "fixed", Actor: actor, Now: enabledAt}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "two occurrences after enabling", func() bool { return jobs() >= before+2 })
	// Nothing passed while disabled was made up: every run after enabling
	// is an occurrence from about then on (one period of slack for the
	// occurrence a worker was taking as the change committed).
	var late int
	if err := b.db.Get(&late, `SELECT count(*) FROM schedule_runs WHERE occurrence_at > $1 AND occurrence_at < $2`,
		next, enabledAt.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if late != 0 {
		t.Errorf("%d occurrences from while the schedule was disabled were enqueued", late)
	}
}
