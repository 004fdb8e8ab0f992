package riversource_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/riversource/riversourcetest"
)

// A bulk replay of River letters runs their jobs again in River, as a
// replay of Redrive's own letters runs jobs: a canary first, then the rest
// at the operation's pace, followed in River until every one settled. A job
// River will not run again (retried there since) is refused for its letter,
// which is pending again, and never counted as replayed.
func TestBulkReplayRunsInRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fixed := new(atomic.Bool)
	db, stores := ordersApp(t)
	source, app := shippingApp(t, db, stores, fixed)
	ops := stores.Operations.WithSources(map[string]dlq.ReplaySender{"orders-app": source})
	const n = 12
	jobs := riversourcetest.Ship(t, app, n)
	waitFor(t, "every discard imported", func() bool {
		var got int
		return db.Get(&got, `SELECT count(*) FROM letter_sources WHERE source = 'orders-app'`) == nil && got == n
	})
	// The letter walked last (the bulk walk goes oldest first), so that
	// the canary is two letters River runs.
	var refused struct {
		Letter int64  `db:"dead_letter_id"`
		Ext    string `db:"external_id"`
	}
	if err := db.Get(&refused, `SELECT s.dead_letter_id, s.external_id FROM letter_sources s
		JOIN dead_letter_records d ON d.id = s.dead_letter_id ORDER BY d.failed_at DESC, d.id DESC LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	refusedJob, _, err := dlq.ParseRiverExternalID(refused.Ext)
	if err != nil {
		t.Fatal(err)
	}
	refusedLetter := refused.Letter

	// The fix ships; someone retries the last job in River UI meanwhile.
	fixed.Store(true)
	if _, err := app.JobRetry(ctx, refusedJob); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "River to complete the job retried there", func() bool {
		job, err := app.JobGet(ctx, refusedJob)
		return err == nil && job.State == rivertype.JobStateCompleted
	})

	const rate = 20.0
	op, err := ops.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: dlq.Actor{Name: "olga"}, Now: time.Now(),
		Reason: "courier token renewed", Canary: 2, RatePerSecond: rate,
		Selection: dlq.Selection{Filter: &dlq.Filter{Source: "orders-app", Status: dlq.StatusPending}}})
	if err != nil {
		t.Fatal(err)
	}
	step := func() dlq.Operation {
		t.Helper()
		if _, err := ops.RunOperationBatch(ctx, op.ID, 100, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.SendSourceReplays(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ops.FollowSourceReplays(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ops.FollowOperations(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		got, err := ops.Operation(ctx, op.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	until := func(what string, cond func(dlq.Operation) bool) dlq.Operation {
		t.Helper()
		var got dlq.Operation
		waitFor(t, what, func() bool { got = step(); return cond(got) })
		return got
	}

	// The canary: two letters, their jobs completed in River.
	got := until("the canary's verdict", func(o dlq.Operation) bool { return o.CanaryVerdict != nil })
	if got.State != dlq.OpCanary || *got.CanaryVerdict != "succeeded" || got.Replays == nil || got.Replays.Succeeded != 2 {
		t.Fatalf("after the canary: state %s, verdict %v, replays %+v", got.State, *got.CanaryVerdict, got.Replays)
	}
	canary, err := ops.OperationJobs(ctx, op.ID, 2)
	if err != nil || len(canary) != 2 {
		t.Fatalf("the canary's replays: %+v (err %v)", canary, err)
	}
	for _, j := range canary {
		if j.Source != "orders-app" || j.JobID == 0 || j.JobID == refusedJob || j.State != dlq.StateSucceeded {
			t.Errorf("a canary replay: %+v; want a River job of orders-app, succeeded", j)
		}
	}

	if _, err := ops.ReleaseCanary(ctx, dlq.ChangeOperationParams{ID: op.ID, Actor: dlq.Actor{Name: "olga"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	got = until("the operation to settle", func(o dlq.Operation) bool { return o.State == dlq.OpDone })
	if c := got.Replays; c == nil || c.Succeeded != n-1 || c.Refused != 1 || c.DiedAgain != 0 || c.Waiting+c.Running != 0 {
		t.Errorf("settled with replays %+v; want %d succeeded and 1 refused", got.Replays, n-1)
	}
	for _, id := range jobs {
		if id == refusedJob {
			continue
		}
		if job, err := app.JobGet(ctx, id); err != nil || job.State != rivertype.JobStateCompleted || job.Attempt != 2 {
			t.Errorf("River job %d: %+v (err %v); want completed at its second attempt", id, job, err)
		}
	}

	// The pace: the released letters were due a slot apart, and none was
	// sent to River before it was due.
	var spread float64
	var early int
	if err := db.QueryRow(`SELECT extract(epoch FROM max(run_at) - min(run_at)), count(*) FILTER (WHERE sent_at < run_at)
		FROM source_replays WHERE operation_id = $1 AND dead_letter_id NOT IN (
			SELECT dead_letter_id FROM source_replays WHERE operation_id = $1 ORDER BY dead_letter_id LIMIT 2)`, op.ID).Scan(&spread, &early); err != nil {
		t.Fatal(err)
	}
	// Ten released, nine slots apart (less a little: a slot is kept to the
	// database clock's microsecond).
	if want := 0.99 * float64(n-3) / rate; spread < want || early > 0 {
		t.Errorf("the released replays were due over %.2f s, %d sent early; at %v a second they take %.2f s", spread, early, rate, float64(n-3)/rate)
	}

	// The refused letter is pending again, its refusal in the audit.
	var status string
	if err := db.Get(&status, `SELECT status FROM dead_letters WHERE id = $1`, refusedLetter); err != nil || status != "pending" {
		t.Errorf("the refused letter is %q (err %v), want pending", status, err)
	}
	page, err := stores.Audit.ListAudit(ctx, dlq.AuditFilter{DeadLetterID: refusedLetter, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	refusals := 0
	for _, e := range page.Entries {
		if e.Action == "replay_refused" {
			refusals++
			t.Logf("refused: %s", e.Reason)
		}
	}
	if refusals != 1 {
		t.Errorf("audit of the refused letter: %+v; want one replay_refused entry", page.Entries)
	}
	// Every replayed letter names its River job.
	var unnamed int
	if err := db.Get(&unnamed, `SELECT count(*) FROM dead_letters d JOIN letter_sources s ON s.dead_letter_id = d.id
		WHERE d.status = 'replayed' AND d.replay_job_id IS NULL`); err != nil || unnamed != 0 {
		t.Errorf("%d replayed letters name no River job (err %v)", unnamed, err)
	}
}
