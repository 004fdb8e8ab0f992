package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/storetest"
)

// TestGroupsLearned: letters grouped through the store share what the
// grouper learned with every other store on the database, merges move
// letters and redirect, and a regrouping keeps ids and summaries true.
func TestGroupsLearned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnotherStoreOnTheDatabaseGivesTheSameGroup", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		a, b := storetest.NewStores(db.DB), storetest.NewStores(db.DB)
		outage := func(id string) grouping.Letter {
			return grouping.Letter{Task: "payments.charge", Class: "ServiceUnavailable",
				Message: "payments-api returned 503 Service Unavailable for POST /v1/charges (request_id req_" + id + ")"}
		}
		first, err := a.Groups.GroupLetter(ctx, outage("33707b4c"))
		if err != nil {
			t.Fatal(err)
		}
		second, err := b.Groups.GroupLetter(ctx, outage("9f0e1d2c"))
		if err != nil {
			t.Fatal(err)
		}
		if first != second {
			t.Errorf("two workers put one outage in groups %s and %s", first, second)
		}
		tpl, err := a.Groups.GroupTemplate(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(tpl.Tokens); got == "" || tpl.Task != "payments.charge" {
			t.Errorf("template %+v", tpl)
		}
	})

	t.Run("AMergeMovesLettersKeepsCountsAndRedirects", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		for i := range 3 {
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "aaaaaaaaaaaaaaaa", Message: fmt.Sprint("a", i)})
		}
		for i := range 2 {
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "bbbbbbbbbbbbbbbb", Message: fmt.Sprint("b", i), Status: "discarded"})
		}
		if err := store.Groups.MergeGroupsUnchecked(ctx, []string{"bbbbbbbbbbbbbbbb"}, "aaaaaaaaaaaaaaaa", dlq.Actor{Name: "priya"}, "one outage"); err != nil {
			t.Fatal(err)
		}
		storetest.AssertSummariesMatch(t, db)
		var total, pending int
		if err := db.QueryRow(`SELECT total, pending FROM error_groups WHERE fingerprint = 'aaaaaaaaaaaaaaaa'`).Scan(&total, &pending); err != nil {
			t.Fatal(err)
		}
		if total != 5 || pending != 3 {
			t.Errorf("survivor holds %d letters, %d pending; want 5, 3", total, pending)
		}
		if into, merged, err := store.Groups.GroupSurvivor(ctx, "bbbbbbbbbbbbbbbb"); err != nil || !merged || into != "aaaaaaaaaaaaaaaa" {
			t.Errorf("GroupSurvivor = %s, %v, %v", into, merged, err)
		}
		var audited int
		if err := db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = 'group_merge' AND actor = 'priya'`); err != nil || audited != 1 {
			t.Errorf("%d merge audit entries (%v), want 1", audited, err)
		}
		// A worker that has not heard of the merge still files its letter
		// under the survivor.
		storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: "bbbbbbbbbbbbbbbb", Message: "late"})
		if n, err := store.Groups.SweepMergedGroups(ctx); err != nil || n != 1 {
			t.Errorf("swept %d letters (%v), want 1", n, err)
		}
		storetest.AssertSummariesMatch(t, db)
	})

	t.Run("TheGrouperNeverUndoesAnOperatorsMerge", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		a, b, x := storetest.GroupID("a"), storetest.GroupID("b"), storetest.GroupID("x")
		for i, id := range []string{a, b, x} {
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Fingerprint: id, Message: fmt.Sprint("m", i)})
			db.MustExec(`INSERT INTO error_templates (id, task, error_class, place, tokens, fixed, seq) VALUES ($1, 'billing.charge', 'RuntimeError', '', $2, '{false}', $3)`,
				id, "{m"+fmt.Sprint(i)+"}", i+1)
		}
		if err := store.Groups.MergeGroupsUnchecked(ctx, []string{b}, a, dlq.Actor{Name: "priya"}, "one failure"); err != nil {
			t.Fatal(err)
		}
		// The grouper later finds b's kept template covered by x's, and
		// merges it there: the operator's merge stands, and so does b's
		// template, which keeps its letters going to a.
		db.MustExec(`SELECT error_group_move(ARRAY[$1], $2, 'system')`, b, x)
		var into, actor string
		if err := db.QueryRow(`SELECT into_id, actor FROM error_group_merges WHERE from_id = $1`, b).Scan(&into, &actor); err != nil || into != a || actor != "priya" {
			t.Errorf("b merged into %s by %s (%v), want into a by priya", into, actor, err)
		}
		if _, err := store.Groups.GroupTemplate(ctx, b); err != nil {
			t.Errorf("b's template after the grouper's merge: %v, want it kept", err)
		}
		// A merge the grouper made deletes the merged template, as before.
		db.MustExec(`SELECT error_group_move(ARRAY[$1], $2, 'system')`, x, a)
		if _, err := store.Groups.GroupTemplate(ctx, x); !errors.Is(err, dlq.ErrNotFound) {
			t.Errorf("x's template after the grouper merged it: %v, want none", err)
		}
		storetest.AssertSummariesMatch(t, db)
	})

	t.Run("TwoWorkersLearningOneMergeAuditItOnce", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		a, b := storetest.NewStores(db.DB), storetest.NewStores(db.DB)
		for _, carrier := range []string{"dhl", "ups", "fedex"} {
			for _, worker := range []*storetest.Stores{a, b} {
				if _, err := worker.Groups.GroupLetter(ctx, grouping.Letter{Task: "orders.ship", Class: "CarrierError",
					Message: "shipment rejected by carrier " + carrier + ": address not verified"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM audit_events WHERE action = 'group_merge'`); err != nil || n != 1 {
			t.Errorf("%d merge audit entries (%v), want 1", n, err)
		}
	})

	t.Run("RebuildRegroupsKeepsIdsAndSummaries", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		store := storetest.NewStores(db.DB)
		// One outage stored under a fresh id per letter, as the old
		// fingerprint did, and two different missing keys under one id.
		for i := range 6 {
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "payments.charge", ErrorClass: "ServiceUnavailable",
				Fingerprint: fmt.Sprintf("%016x", 0xa0+i), Status: map[bool]string{true: "replayed"}[i == 5],
				Message: fmt.Sprintf("payments-api returned 503 for POST /v1/charges (request_id req_%08x)", 7919*i+1)})
		}
		for _, key := range []string{"'sku'", "'quantity'", "'sku'"} {
			storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "orders.ship", ErrorClass: "KeyError",
				Fingerprint: "cccccccccccccccc", Message: key})
		}
		res, err := store.Groups.RebuildGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Letters != 9 || res.Groups != 3 {
			t.Errorf("rebuild %+v, want 9 letters in 3 groups", res)
		}
		storetest.AssertSummariesMatch(t, db)
		var outage []string
		if err := db.Select(&outage, `SELECT DISTINCT fingerprint FROM dead_letters WHERE task = 'payments.charge'`); err != nil {
			t.Fatal(err)
		}
		if len(outage) != 1 {
			t.Fatalf("the outage is in %d groups, want 1", len(outage))
		}
		// The outage kept one of its old ids; the others redirect to it.
		for i := range 6 {
			old := fmt.Sprintf("%016x", 0xa0+i)
			if into, _, err := store.Groups.GroupSurvivor(ctx, old); err != nil || into != outage[0] {
				t.Errorf("old id %s leads to %s (%v), want %s", old, into, err, outage[0])
			}
		}
		var keys int
		if err := db.Get(&keys, `SELECT count(DISTINCT fingerprint) FROM dead_letters WHERE task = 'orders.ship'`); err != nil || keys != 2 {
			t.Errorf("two missing keys in %d groups (%v), want 2", keys, err)
		}
		var sku string
		if err := db.Get(&sku, `SELECT DISTINCT fingerprint FROM dead_letters WHERE error_message = '''sku'''`); err != nil || sku != "cccccccccccccccc" {
			t.Errorf("the bigger part of the old group keeps its id: got %s (%v)", sku, err)
		}
		// A second rebuild moves nothing.
		again, err := store.Groups.RebuildGroups(ctx)
		if err != nil || again.Moved != 0 {
			t.Errorf("second rebuild %+v (%v), want nothing moved", again, err)
		}
	})
}
