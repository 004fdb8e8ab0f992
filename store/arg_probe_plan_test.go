package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/storetest"
)

// TestRareArgumentRangeReadsFewBuffers: on 100,000 seeded letters, a
// page of pending letters for a range on the arguments that few letters
// match, or none, reads the probe's candidates by primary key: a few
// buffers a candidate, where the walk newest first reads the letters until
// the page is full, all of them when none matches. A common range is
// left to the walk, which finds its page at once.
func TestRareArgumentRangeReadsFewBuffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	if err := storetest.SeedDeadLetters(ctx, db.DB, 100_000, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM ANALYZE dead_letter_arg_values`); err != nil {
		t.Fatal(err)
	}
	// The seed's first positional argument is the letter's job id.
	var top int64
	if err := db.GetContext(ctx, &top, `SELECT max((args->>0)::bigint) FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	page := func(l *letters.Store, q string) (buffers float64, rows int) {
		t.Helper()
		f := dlq.Filter{Q: q, Status: dlq.StatusPending}
		sql, args, err := l.ProbedListPageSQL(ctx, f, 50)
		if err != nil {
			t.Fatal(err)
		}
		var raw string
		if err := db.GetContext(ctx, &raw, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, args...); err != nil {
			t.Fatal(err)
		}
		_, buffers = executionOf(t, raw)
		found, err := l.ListDeadLetters(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return buffers, len(found.Letters)
	}
	probed := storetest.NewStores(db.DB).Letters
	walked := probed.WithArgProbe(letters.ArgProbe{Cap: -1})
	for _, tc := range []struct {
		q         string
		most      float64 // buffers, probed
		walkLeast float64 // buffers, walked
	}{
		{fmt.Sprintf("args.0>%d", top-20), 400, 10_000},
		{fmt.Sprintf("args.0>%d", top+1), 100, 10_000},
		{fmt.Sprintf("args.0>%d and kwargs.region:eu", top-60), 400, 10_000},
	} {
		pb, pn := page(probed, tc.q)
		wb, wn := page(walked, tc.q)
		t.Logf("%s: probed %.0f buffers, walked %.0f; %d letters", tc.q, pb, wb, pn)
		if pn != wn {
			t.Errorf("%s: %d letters probed, %d walked", tc.q, pn, wn)
		}
		if pb > tc.most || wb < tc.walkLeast {
			t.Errorf("%s: the page read %.0f buffers probed (want at most %.0f), %.0f walked (the walk at least %.0f)",
				tc.q, pb, tc.most, wb, tc.walkLeast)
		}
	}
	// A common range: the probe gives up (more than its cap) and the walk
	// fills the page from the newest letters.
	b, n := page(probed, "args.0>0")
	if n != 50 || b > 1_000 {
		t.Errorf("a common range read %.0f buffers for %d letters, want 50 in at most 1,000", b, n)
	}
}
