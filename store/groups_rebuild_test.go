package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/storetest"
)

// TestRebuildKeepsOperatorChoices: `redrive groups rebuild` relearns
// every group from the letters, but what an operator decided stands: two
// groups merged by hand stay one, a group split by hand stays split, each
// under its id, and every summary is recounted.
func TestRebuildKeepsOperatorChoices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newEditFixture(t)
	operator := dlq.Actor{Name: "priya"}

	// Merged by hand: two missing keys the operator knows are one bug
	// (their templates cannot widen: quoted keys are fixed words).
	sku := f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{})
	qty := f.letter(t, "orders.pack", "KeyError", "'quantity'", storetest.Letter{})
	f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{})
	if _, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: sku, Groups: []string{qty}, Survivor: qty, Actor: operator, Reason: "one bad import"}); err != nil {
		t.Fatal(err)
	}

	// Split by hand: one learned group of three carriers, split by carrier.
	var group string
	for i, c := range []string{"dhl", "ups", "fedex", "dhl", "ups", "fedex", "dhl"} {
		group = f.letter(t, "orders.ship", "CarrierError", carrierMsg(c), storetest.Letter{FailedAt: f.at.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := f.store.Groups.SweepMergedGroups(ctx); err != nil {
		t.Fatal(err)
	}
	tpl, err := f.store.Groups.GroupTemplate(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	split, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: slices.Index(tpl.Tokens, grouping.Wildcard),
		Actor: operator, Reason: "three carriers, three bugs"})
	if err != nil {
		t.Fatal(err)
	}
	if len(split.Parts) != 3 {
		t.Fatalf("split = %+v, want 3 parts", split)
	}

	res, err := f.store.Groups.RebuildGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 0 {
		t.Errorf("the rebuild moved %d letters; every letter already was where the operator put it", res.Moved)
	}
	for _, msg := range []string{"'sku'", "'quantity'"} {
		if got := groupOfLetter(t, f, msg); got != qty {
			t.Errorf("after the rebuild, %s letters are in %s; the operator merged them into %s", msg, got, qty)
		}
	}
	if into, merged, err := f.store.Groups.GroupSurvivor(ctx, sku); err != nil || !merged || into != qty {
		t.Errorf("after the rebuild, %s leads to %s (merged %v, %v); want %s", sku, into, merged, err, qty)
	}
	for _, part := range split.Parts {
		if got := groupOfLetter(t, f, carrierMsg(part.Word)); got != part.Group {
			t.Errorf("after the rebuild, %s letters are in %s; the split put them in %s", part.Word, got, part.Group)
		}
	}
	// And the grouper after it still honours both.
	if got := f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{}); got != qty {
		t.Errorf("a new 'sku' letter went to %s, want %s", got, qty)
	}
	for _, part := range split.Parts {
		if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg(part.Word), storetest.Letter{}); got != part.Group {
			t.Errorf("a new %s letter went to %s, want %s", part.Word, got, part.Group)
		}
	}
	assertRecounted(t, f.db)
}

// TestRebuildBesideAWorker: letters filed one group each, as the first
// fingerprinter left them, are regrouped while a worker keeps
// dead-lettering (under the old ids, which its statement resolves through
// the redirects) and an operator keeps discarding. The letters that came
// in after the rebuild read them follow their old id to its new group.
// Afterwards every summary matches its letters, every old id leads to a
// live group, and a second rebuild moves nothing.
func TestRebuildBesideAWorker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	const letters = 25_000
	if err := storetest.SeedDeadLetters(ctx, db.DB, letters, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Every letter out and back in under an id of its own, through the
	// letters' triggers, so that every summary counts it there.
	db.MustExec(`
		WITH gone AS (DELETE FROM dead_letter_records RETURNING *)
		INSERT INTO dead_letter_records (id, job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
			traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at, traceback_template)
		OVERRIDING SYSTEM VALUE
		SELECT id, job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
			traceback, attempts, max_attempts, history, reason, substr(md5(id::text), 1, 16), worker_version, enqueued_at, failed_at, traceback_template
		FROM gone`)
	var before int
	if err := db.Get(&before, `SELECT count(*) FROM error_groups`); err != nil || before != letters {
		t.Fatalf("%d groups before (%v), want one a letter", before, err)
	}
	storetest.AssertSummariesMatch(t, db)

	stop := make(chan struct{})
	worked := make(chan error, 1)
	go func() {
		var err error
		defer func() { worked <- err }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// A letter like an old one, under its old id, resolved as the
			// worker's dead-lettering statement resolves it.
			if _, err = db.ExecContext(ctx, `
				INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
					attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at)
				SELECT nextval(pg_get_serial_sequence('jobs', 'id')), queue, task, args, kwargs, error_class, error_message, traceback,
					attempts, max_attempts, history, reason,
					coalesce((SELECT m.into_id FROM error_group_merges m WHERE m.from_id = d.fingerprint), d.fingerprint),
					worker_version, enqueued_at, now()
				FROM dead_letter_records d WHERE d.id = (SELECT min(id) FROM dead_letter_records) + $1`, i*7%letters); err != nil {
				return
			}
			// An operator's discard of a pending letter.
			if _, err = db.ExecContext(ctx, `
				WITH taken AS (
					DELETE FROM pending_dead_letters p WHERE p.id = (SELECT id FROM pending_dead_letters ORDER BY id OFFSET $1 LIMIT 1)
					RETURNING p.id, p.failed_at, p.task, p.queue
				)
				INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, discarded_at, discarded_by, discard_reason)
				SELECT failed_at, id, task, queue, now(), 'test', 'not needed' FROM taken`, i*13%1000); err != nil {
				return
			}
		}
	}()
	res, err := store.Groups.RebuildGroups(ctx)
	close(stop)
	if werr := <-worked; werr != nil {
		t.Fatalf("the worker beside the rebuild: %v", werr)
	}
	if err != nil {
		t.Fatal(err)
	}
	var added, discarded int
	if err := db.Get(&added, `SELECT count(*) FROM dead_letter_records WHERE id > $1`, letters); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&discarded, `SELECT count(*) FROM dead_letter_outcomes WHERE discarded_by = 'test'`); err != nil {
		t.Fatal(err)
	}
	t.Logf("rebuild %+v; beside it the worker added %d letters and the operator discarded %d", res, added, discarded)
	if added == 0 || discarded == 0 {
		t.Errorf("nothing ran beside the rebuild")
	}
	if res.Letters < letters || res.Moved < letters/2 || res.Groups > 500 {
		t.Errorf("rebuild %+v: want at least %d letters, most of them moved into far fewer groups", res, letters)
	}
	assertRecounted(t, db)
	var dangling int
	if err := db.Get(&dangling, `
		SELECT count(*) FROM error_group_merges m
		WHERE NOT EXISTS (SELECT 1 FROM error_groups g WHERE g.fingerprint = m.into_id)
		   OR EXISTS (SELECT 1 FROM error_groups g WHERE g.fingerprint = m.from_id)`); err != nil {
		t.Fatal(err)
	}
	if dangling != 0 {
		t.Errorf("%d redirects lead nowhere or leave a live group", dangling)
	}
	var unled int
	if err := db.Get(&unled, `
		SELECT count(*) FROM generate_series(1, $1) AS i
		WHERE NOT EXISTS (SELECT 1 FROM error_groups g WHERE g.fingerprint = substr(md5(i::text), 1, 16))
		  AND NOT EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = substr(md5(i::text), 1, 16))
		  AND EXISTS (SELECT 1 FROM dead_letter_records d WHERE d.id = i)`, letters); err != nil {
		t.Fatal(err)
	}
	if unled != 0 {
		t.Errorf("%d old ids lead nowhere after the rebuild", unled)
	}
	var daily int
	if err := db.Get(&daily, `
		SELECT count(*) FROM (
			SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day, sum(n) AS n FROM dead_letter_inflow GROUP BY 1, 2
		) real FULL JOIN dead_letter_inflow_daily kept USING (fingerprint, day)
		WHERE real.n IS DISTINCT FROM kept.n`); err != nil {
		t.Fatal(err)
	}
	if daily != 0 {
		t.Errorf("%d daily inflow rows differ from the hourly ones", daily)
	}
	again, err := store.Groups.RebuildGroups(ctx)
	if err != nil || again.Moved != 0 {
		t.Errorf("second rebuild %+v (%v), want nothing moved", again, err)
	}
	assertRecounted(t, db)
}
