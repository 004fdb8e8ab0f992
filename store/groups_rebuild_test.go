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
