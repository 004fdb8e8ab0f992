package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// runningJob inserts a job running under worker's lease on its last attempt.
func runningJob(t *testing.T, db *storetest.DB, worker string, leaseLeft time.Duration) int64 {
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
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	// Both workers' jobs have leases that ran out a second ago. "alive"
	// heartbeated since (it was up, but could not renew or record in
	// time); "silent" stopped heartbeating before its lease ran out.
	db.MustExec(`INSERT INTO workers (id, host, pid, version, queues, tasks, concurrency, heartbeat_at) VALUES
		('alive', 'h', 1, 'v1', '{default}', '{t.task}', 1, now()),
		('silent', 'h', 2, 'v1', '{default}', '{t.task}', 1, now() - interval '5 minutes')`)
	aliveJob := runningJob(t, db, "alive", -time.Second)
	silentJob := runningJob(t, db, "silent", -time.Second)
	res, err := store.Queue.RescueExpired(ctx, 10, "rescuer", time.Now(), 0)
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
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	id := runningJob(t, db, "w1", time.Minute)
	handed, err := store.Queue.HandBack(ctx, dlq.Lease{Worker: "w1", JobID: id, Attempt: 1}, dlq.Attempt{Attempt: 1, At: time.Now()})
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

// expiredClaim inserts a job on its first attempt, running under worker's
// claim, whose lease ran out a second ago.
func expiredClaim(t *testing.T, db *storetest.DB, worker string, maxAttempts int) int64 {
	t.Helper()
	var id int64
	err := db.Get(&id, `INSERT INTO jobs (task, state, attempt, max_attempts, lease_owner, lease_expires_at, attempted_at)
		VALUES ('t.task', 'running', 1, $2, $1, now() - interval '1 second', now() - interval '5 seconds')
		RETURNING id`, worker, maxAttempts)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAnOutcomeIsWrittenWhileNobodyTookTheJob: an outcome is written while
// the job still belongs to the claim whose handler ran, its lease expired
// or not; after the rescuer requeued it from that claim, the claim takes
// it back as long as nobody claimed it since; once another claim has
// taken it, never.
func TestAnOutcomeIsWrittenWhileNobodyTookTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	lease := func(id int64) dlq.Lease { return dlq.Lease{Worker: "w1", JobID: id, Attempt: 1} }
	state := func(id int64) (s string) {
		if err := db.Get(&s, `SELECT state FROM jobs WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		return s
	}
	rescue := func() {
		if _, err := store.Queue.RescueExpired(ctx, 10, "rescuer", time.Now(), 0); err != nil {
			t.Fatal(err)
		}
	}

	// The lease ran out, nobody took the job: the outcome is still the claim's.
	lapsed := expiredClaim(t, db, "w1", 2)
	if done, err := store.Queue.CompleteMany(ctx, "w1", []dlq.Lease{lease(lapsed)}); err != nil || len(done) != 1 || state(lapsed) != "succeeded" {
		t.Errorf("complete after the lease ran out: %v, %v, job %s; want it written", done, err, state(lapsed))
	}

	// Rescued and requeued from this claim, not claimed since: taken back.
	requeued := expiredClaim(t, db, "w1", 2)
	rescue()
	retry := dlq.RetryOutcome{Lease: lease(requeued), Delay: time.Minute, Attempt: dlq.Attempt{Attempt: 1, Class: "E", Message: "m"}}
	if done, err := store.Queue.RetryMany(ctx, "w1", []dlq.RetryOutcome{retry}); err != nil || len(done) != 0 {
		t.Fatalf("retry of a rescued job: %v, %v; want nothing written before it is taken back", done, err)
	}
	if taken, err := store.Queue.ReclaimRescued(ctx, "w1", []dlq.Lease{lease(requeued)}, time.Minute); err != nil ||
		!slices.Equal(taken, []dlq.Lease{lease(requeued)}) || state(requeued) != "running" {
		t.Fatalf("take back a job rescued from this claim, not claimed since: %v, %v, job %s; want it running under the claim",
			taken, err, state(requeued))
	}
	if done, err := store.Queue.RetryMany(ctx, "w1", []dlq.RetryOutcome{retry}); err != nil || len(done) != 1 {
		t.Errorf("retry of the job taken back: %v, %v; want it written", done, err)
	}

	// Rescued, then claimed again by another worker.
	retaken := expiredClaim(t, db, "w1", 2)
	rescue()
	if jobs, err := store.Queue.Claim(ctx, "w2", []string{dlq.DefaultQueue}, 10, time.Minute); err != nil || len(jobs) != 1 || jobs[0].ID != retaken {
		t.Fatalf("claim of the rescued job: %v, %v", jobs, err)
	}
	if taken, err := store.Queue.ReclaimRescued(ctx, "w1", []dlq.Lease{lease(retaken)}, time.Minute); err != nil || len(taken) != 0 {
		t.Errorf("take back a job another worker claimed since: %v, %v; want nothing taken", taken, err)
	}
	if done, err := store.Queue.CompleteMany(ctx, "w1", []dlq.Lease{lease(retaken)}); err != nil || len(done) != 0 || state(retaken) != "running" {
		t.Errorf("complete after another claim took the job: %v, %v, job %s; want nothing written", done, err, state(retaken))
	}
}

// TestRecordLostOutcomes: the history of a job says that an attempt ran
// and its outcome was lost exactly where the job moved past the claim
// without the outcome, and nowhere else.
func TestRecordLostOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	lease := func(id int64) dlq.Lease { return dlq.Lease{Worker: "w1", JobID: id, Attempt: 1} }
	rescue := func() {
		if _, err := store.Queue.RescueExpired(ctx, 10, "rescuer", time.Now(), 0); err != nil {
			t.Fatal(err)
		}
	}
	claimAgain := func(id int64) {
		if jobs, err := store.Queue.Claim(ctx, "w2", []string{dlq.DefaultQueue}, 10, time.Minute); err != nil || len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("claim of the rescued job: %v, %v", jobs, err)
		}
	}

	retaken := expiredClaim(t, db, "w1", 2) // rescued, then claimed by w2
	rescue()
	claimAgain(retaken)
	deadLettered := expiredClaim(t, db, "w1", 1) // rescued into the dead letters on its last attempt
	rescue()
	succeeded := expiredClaim(t, db, "w1", 2) // its success was written after all
	if _, err := store.Queue.CompleteMany(ctx, "w1", []dlq.Lease{lease(succeeded)}); err != nil {
		t.Fatal(err)
	}
	retried := expiredClaim(t, db, "w1", 2) // its retry was written, then w2 claimed the next attempt
	retry := dlq.RetryOutcome{Lease: lease(retried), Attempt: dlq.Attempt{Attempt: 1, Worker: "w1", Class: "E", Message: "m"}}
	if _, err := store.Queue.RetryMany(ctx, "w1", []dlq.RetryOutcome{retry}); err != nil {
		t.Fatal(err)
	}
	claimAgain(retried)

	var lost []dlq.LostOutcome
	for _, id := range []int64{retaken, deadLettered, succeeded, retried} {
		lost = append(lost, dlq.LostOutcome{Lease: lease(id), Attempt: dlq.Attempt{Message: "the handler ran and succeeded, but…"}})
	}
	noted, err := store.Queue.RecordLostOutcomes(ctx, "w1", lost)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{retaken, deadLettered}; !slices.Equal(slices.Sorted(slices.Values(noted)), want) {
		t.Errorf("noted the lost outcomes of jobs %v; want %v (retaken, dead-lettered), not %d (written) nor %d (retry written)",
			noted, want, succeeded, retried)
	}
	j, err := store.Queue.Job(ctx, retaken)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := j.Errors.Last()
	if last.Attempt != 1 || last.Worker != "w1" || last.Outcome != dlq.OutcomeLost || last.Class != dlq.OutcomeLostClass || j.Attempt != 2 {
		t.Errorf("retaken job on attempt %d, newest entry %+v; want attempt 2 and w1's attempt 1 recorded as %s", j.Attempt, last, dlq.OutcomeLost)
	}
}
