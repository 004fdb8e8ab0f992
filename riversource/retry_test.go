package riversource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/riversource"
	"github.com/redrive/redrive/riversource/riversourcetest"
	"github.com/redrive/redrive/store/storetest"
)

// A letter of River is replayed in River: the same job runs again there
// and succeeds once the fix shipped; a replay that dies again is a new
// letter, linked to the one it replays; what River will not retry is
// refused with the reason, the letter left pending.
func TestReplayRetriesInRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fixed := new(atomic.Bool)
	db, stores := ordersApp(t)
	source, app := shippingApp(t, db, stores, fixed)
	ops := stores.Operations.WithSources(map[string]dlq.ReplaySender{"orders-app": source})
	jobs := riversourcetest.Ship(t, app, 3)
	letterOf := func(job int64, attempt int) int64 {
		t.Helper()
		var id int64
		waitFor(t, fmt.Sprintf("the letter of River job %d at attempt %d", job, attempt), func() bool {
			err := db.Get(&id, `SELECT dead_letter_id FROM letter_sources WHERE source = 'orders-app' AND external_id = $1`,
				dlq.RiverExternalID(job, attempt))
			return err == nil
		})
		return id
	}
	first, second, third := letterOf(jobs[0], 1), letterOf(jobs[1], 1), letterOf(jobs[2], 1)
	actor := dlq.Actor{Name: "olga"}

	// Replayed before the fix: River runs the job again, it fails again,
	// and its new letter says it is the replay of the first.
	res, err := ops.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: first, Actor: actor, Now: time.Now()})
	if err != nil {
		t.Fatalf("replay a River letter: %v", err)
	}
	if res.JobID != jobs[0] || res.Source != "orders-app" {
		t.Errorf("replay result %+v, want River job %d in orders-app", res, jobs[0])
	}
	again := letterOf(jobs[0], 2)
	var replayOf int64
	if err := db.Get(&replayOf, `SELECT replay_of FROM dead_letter_records WHERE id = $1`, again); err != nil || replayOf != first {
		t.Errorf("the letter of the replay that died again is a replay of %d (err %v), want %d", replayOf, err, first)
	}

	// After the fix: the job succeeds in River.
	fixed.Store(true)
	if _, err := ops.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: second, Actor: actor, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "River to complete the replayed job", func() bool {
		job, err := app.JobGet(ctx, jobs[1])
		return err == nil && job.State == rivertype.JobStateCompleted
	})
	var status string
	if err := db.Get(&status, `SELECT status FROM dead_letters WHERE id = $1`, second); err != nil || status != "replayed" {
		t.Errorf("the replayed letter is %q (err %v)", status, err)
	}
	page, err := stores.Audit.ListAudit(ctx, dlq.AuditFilter{DeadLetterID: second, Limit: 10})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Action != dlq.ActionReplay {
		t.Fatalf("audit of the replay: %+v (err %v)", page.Entries, err)
	}
	var details struct {
		Source string `json:"source"`
		JobID  int64  `json:"source_job_id"`
	}
	if err := json.Unmarshal(page.Entries[0].Details, &details); err != nil || details.Source != "orders-app" || details.JobID != jobs[1] {
		t.Errorf("the audit entry of the replay says %s (err %v)", page.Entries[0].Details, err)
	}

	// Where each replay ended, as the audit entry's letters show it: the
	// first died again as its new letter; neither is looked for among
	// Redrive's own jobs, whose ids River's may share; where each is in
	// River is what following it there found.
	if err := ops.FollowSourceReplays(ctx); err != nil {
		t.Fatal(err)
	}
	outcomes, err := stores.Operations.ReplayOutcomes(ctx, []int64{first, second})
	if err != nil {
		t.Fatal(err)
	}
	if o := outcomes[first]; o.Source != "orders-app" || o.DiedAgainAs == nil || *o.DiedAgainAs != again || o.JobState != dlq.StateDead {
		t.Errorf("outcome of the replay that died again: %+v", o)
	}
	if o := outcomes[second]; o.Source != "orders-app" || o.DiedAgainAs != nil || o.JobID != jobs[1] || o.JobState != dlq.StateSucceeded {
		t.Errorf("outcome of the replay that completed: %+v", o)
	}

	// Replayed twice: the second is refused as already replayed.
	if _, err := ops.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: second, Actor: actor, Now: time.Now()}); !errors.Is(err, dlq.ErrConflict) {
		t.Errorf("a second replay: %v, want a conflict", err)
	}

	// Edited arguments: River keeps its own, so the edit is refused.
	if _, err := ops.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: third, Actor: actor, Now: time.Now(),
		Kwargs: json.RawMessage(`{"order":"ord_x"}`)}); !errors.Is(err, dlq.ErrConflict) {
		t.Errorf("an edited replay of a River letter: %v, want a conflict", err)
	}

	// Retried in River meanwhile (River UI): Redrive will not run it once more.
	if _, err := app.JobRetry(ctx, jobs[2]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "River to complete the job retried there", func() bool {
		job, err := app.JobGet(ctx, jobs[2])
		return err == nil && job.State == rivertype.JobStateCompleted
	})
	_, err = ops.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: third, Actor: actor, Now: time.Now()})
	if !errors.Is(err, dlq.ErrConflict) {
		t.Fatalf("replay of a job retried in River: %v, want a conflict", err)
	}
	t.Logf("refused: %v", err)
	if err := db.Get(&status, `SELECT status FROM dead_letters WHERE id = $1`, third); err != nil || status != "pending" {
		t.Errorf("a refused replay left the letter %q (err %v), want pending", status, err)
	}
}

// waitFor polls cond every 20 ms for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Discarding a River letter leaves River's job where it is, unless the
// operator asks to delete it there too; a Redrive letter has no job
// elsewhere to delete, and a job River retried since is kept.
func TestDiscardDeletesInRiverOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, stores := ordersApp(t)
	fixed := new(atomic.Bool)
	source, app := shippingApp(t, db, stores, fixed)
	ops := stores.Operations.WithSources(map[string]dlq.ReplaySender{"orders-app": source})
	jobs := riversourcetest.Ship(t, app, 3)
	letters := make([]int64, len(jobs))
	for i, job := range jobs {
		waitFor(t, "the letter of each job", func() bool {
			return db.Get(&letters[i], `SELECT dead_letter_id FROM letter_sources WHERE external_id = $1`, dlq.RiverExternalID(job, 1)) == nil
		})
	}
	actor := dlq.Actor{Name: "olga"}

	if _, err := ops.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: letters[0], Actor: actor, Reason: "refunded by hand", Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if job, err := app.JobGet(ctx, jobs[0]); err != nil || job.State != rivertype.JobStateDiscarded {
		t.Errorf("a plain discard touched River's job: %v (err %v)", job, err)
	}

	if _, err := ops.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: letters[1], Actor: actor, Reason: "test order", Now: time.Now(),
		DeleteInSource: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := app.JobGet(ctx, jobs[1]); !errors.Is(err, river.ErrNotFound) {
		t.Errorf("River still has the job a discard deleted: err %v", err)
	}
	page, err := stores.Audit.ListAudit(ctx, dlq.AuditFilter{DeadLetterID: letters[1], Limit: 10})
	if err != nil || len(page.Entries) != 1 || !strings.Contains(string(page.Entries[0].Details), `"deleted_in_source": "orders-app"`) {
		t.Errorf("the discard's audit entry: %+v (err %v)", page.Entries, err)
	}

	// Retried in River meanwhile: kept there, and the letter stays pending.
	fixed.Store(true)
	if _, err := app.JobRetry(ctx, jobs[2]); err != nil {
		t.Fatal(err)
	}
	_, err = ops.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: letters[2], Actor: actor, Reason: "x", Now: time.Now(), DeleteInSource: true})
	if !errors.Is(err, dlq.ErrConflict) {
		t.Errorf("deleting a job River retried since: %v, want a conflict", err)
	}
	var status string
	if err := db.Get(&status, `SELECT status FROM dead_letters WHERE id = $1`, letters[2]); err != nil || status != "pending" {
		t.Errorf("a refused discard left the letter %q (err %v)", status, err)
	}

	// Redrive's own letter has no job elsewhere.
	own := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "billing.charge"})
	var verr *dlq.ValidationError
	if _, err := ops.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: own, Actor: actor, Reason: "x", Now: time.Now(), DeleteInSource: true}); !errors.As(err, &verr) {
		t.Errorf("deleting the job of Redrive's own letter elsewhere: %v, want a validation error", err)
	}
}

// shippingApp runs a River app shipping orders in db's database and the
// River source orders-app importing its discards, fast, until the test
// ends.
func shippingApp(t *testing.T, db *storetest.DB, stores *storetest.Stores, fixed *atomic.Bool) (*riversource.Source, *river.Client[pgx.Tx]) {
	t.Helper()
	pool, app := riverApp(t, db.DSN, func(w *river.Workers) { river.AddWorker(w, riversourcetest.ShipWorker{Fixed: fixed}) })
	source, _ := runSource(t, riversource.Config{Source: "orders-app", Pool: pool, Store: stores.Sources,
		Every: 50 * time.Millisecond, Settle: 200 * time.Millisecond, RecentEvery: 500 * time.Millisecond})
	return source, app
}
