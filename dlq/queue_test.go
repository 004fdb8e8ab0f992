package dlq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// runningJob inserts a job running under worker's lease on its last attempt.
func runningJob(t *testing.T, db *dlqtest.DB, worker string, leaseLeft time.Duration) int64 {
	t.Helper()
	var id int64
	err := db.Get(&id, `INSERT INTO jobs (task, state, attempt, max_attempts, lease_owner, lease_expires_at, run_at)
		VALUES ('t.task', 'running', 1, 1, $1, now() + $2 * interval '1 millisecond', '2026-01-02T03:04:05Z')
		RETURNING id`, worker, leaseLeft.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestRescueSaysWhatHappened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	// Both workers' jobs have leases that ran out a second ago. "alive"
	// heartbeated since (it was up, but could not renew or record in
	// time); "silent" stopped heartbeating before its lease ran out.
	db.MustExec(`INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, heartbeat_at) VALUES
		('alive', 'h', 1, 'v1', '{default}', '{t.task}', 1, now()),
		('silent', 'h', 2, 'v1', '{default}', '{t.task}', 1, now() - interval '5 minutes')`)
	aliveJob := runningJob(t, db, "alive", -time.Second)
	silentJob := runningJob(t, db, "silent", -time.Second)
	res, err := store.RescueExpired(ctx, 10, "rescuer", time.Now(), 0)
	if err != nil || res.DeadLettered != 2 {
		t.Fatalf("rescue: %+v, %v; want 2 dead-lettered", res, err)
	}
	message := func(job int64) string {
		var m string
		if err := db.Get(&m, `SELECT error_message FROM dead_letters WHERE job_id = $1`, job); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := message(aliveJob); !strings.Contains(m, "still heartbeating") || strings.Contains(m, "crash") {
		t.Errorf("letter of a live worker's job says %q; it must not blame a crash", m)
	}
	if m := message(silentJob); !strings.Contains(m, "stopped heartbeating") {
		t.Errorf("letter of a silent worker's job says %q; want it to say the worker stopped heartbeating", m)
	}
	var groups int
	if err := db.Get(&groups, `SELECT count(DISTINCT fingerprint) FROM dead_letters`); err != nil || groups != 2 {
		t.Errorf("the two causes share a fingerprint (%d groups, %v); they are different problems", groups, err)
	}
}

func TestHandBackKeepsItsPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	id := runningJob(t, db, "w1", time.Minute)
	handed, err := store.HandBack(ctx, dlq.Lease{Worker: "w1", JobID: id, Attempt: 1}, dlq.Attempt{Attempt: 1, At: time.Now()})
	if err != nil || !handed {
		t.Fatalf("hand back: %v, %v", handed, err)
	}
	var j struct {
		State   string    `db:"state"`
		Attempt int       `db:"attempt"`
		RunAt   time.Time `db:"run_at"`
	}
	if err := db.Get(&j, `SELECT state, attempt, run_at FROM jobs WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !j.RunAt.Equal(want) || j.State != "available" || j.Attempt != 0 {
		t.Fatalf("handed back: %+v; want available, attempt 0, run_at kept at %s (its place in the queue)", j, want)
	}
}
