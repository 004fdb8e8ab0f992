package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/storetest"
)

// probeModes are the ways a read may go: never probing (the walk), the
// product's probe, one that always narrows (no cap to speak of), and one
// whose cap every probe exceeds, so that it walks after probing.
var probeModes = []struct {
	name  string
	probe letters.ArgProbe
}{
	{"off", letters.ArgProbe{Cap: -1}},
	{"default", letters.ArgProbe{}},
	{"uncapped", letters.ArgProbe{Cap: 1 << 30}},
	{"cap1", letters.ArgProbe{Cap: 1}},
}

// unindex makes a letter look as if the search indexer had not reached it
// yet: no search row, no argument values, its id queued.
func unindex(t *testing.T, db *sqlx.DB, id int64) {
	t.Helper()
	if _, err := db.Exec(`WITH a AS (DELETE FROM dead_letter_arg_values WHERE dead_letter_id = $1),
		s AS (DELETE FROM dead_letter_search WHERE dead_letter_id = $1)
		INSERT INTO dead_letter_search_queue (first_id, ids, n) VALUES ($1, ARRAY[$1::bigint], 1)`, id); err != nil {
		t.Fatal(err)
	}
}

// Ranges on the arguments read the same letters whether the store probes
// the index of argument values or walks the letters, in every reader of a
// filter: the page, its count, the newer-letters poll, an export, a bulk
// preview (count and sample) and a bulk operation's batches. The letters
// include one not yet indexed (still queued), one purged, one with more
// values than the index keeps, numbers negative and fractional, strings
// longer than the prefix kept, nested keys, a key with a dot and array
// positions; a not or an or with a term the index cannot answer walks.
func TestArgumentRangesReadTheSameWithAndWithoutTheProbe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	now := time.Now().UTC().Truncate(time.Second)
	at := 0
	letter := func(args, kwargs string) int64 {
		at++
		return storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Args: args, Kwargs: kwargs,
			FailedAt: now.Add(time.Duration(at-100) * time.Minute), Message: "charge failed"})
	}
	long := strings.Repeat("x", 70)
	var big []string
	for i := range 300 {
		big = append(big, fmt.Sprint(i))
	}
	a := letter(`["ORD-1", {"qty": 3}]`, `{"amount": 1500, "currency": "EUR", "crm_id": "99990001", "customer": {"id": "cus_1", "score": -2.5}}`)
	b := letter(`["ORD-2", {"qty": 30}]`, `{"amount": 999.5, "currency": "USD", "crm_id": "10000000", "tags": [5, 50], "note": "`+long+`b"}`)
	c := letter(`[7]`, `{"amount": "2000", "odd.key": 7, "a\\b": 9, "customer": {"score": 1e3}}`)
	d := letter(`[]`, `{"amount": -10, "big": [`+strings.Join(big, ",")+`]}`)
	r := letter(`["ORD-3"]`, `{"amount": 3000, "currency": "EUR"}`)
	none := letter(`[]`, `{}`)
	// Of a group of its own, not growing: purged at once.
	purged := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: "old.task", Args: `["ORD-4"]`, Kwargs: `{"amount": 7000}`,
		FailedAt: now.Add(-72 * time.Hour), Message: "charge failed"})
	u := letter(`["ORD-9"]`, `{"amount": 5000, "currency": "GBP"}`)
	unindex(t, db.DB, u)
	storetest.Settle(t, db.DB, storetest.Outcome{Status: "replayed"}, "id = $1", r)
	storetest.Settle(t, db.DB, storetest.Outcome{Status: "discarded", At: now.Add(-48 * time.Hour)}, "id = $1", purged)
	if n, _, err := stores.Operations.PurgeSettled(ctx, dlq.PurgeParams{OlderThan: time.Hour, Now: now, Actor: alice}); err != nil || n != 1 {
		t.Fatalf("purged %d (err %v), want 1", n, err)
	}
	var left int
	if err := db.Get(&left, `SELECT count(*) FROM dead_letter_arg_values WHERE dead_letter_id = $1`, purged); err != nil || left != 0 {
		t.Fatalf("the purged letter keeps %d argument values (err %v)", left, err)
	}
	if err := db.Get(&left, `SELECT count(*) FROM dead_letter_arg_values WHERE dead_letter_id = $1 AND path = '' AND str = ''`, d); err != nil || left != 1 {
		t.Fatalf("the letter with 300 values has %d markers (err %v), want 1", left, err)
	}

	for _, tc := range []struct {
		q      string
		want   []int64 // every status
		probed bool    // the probe narrows it
	}{
		{"kwargs.amount>999", []int64{a, b, r, u}, true},
		{"kwargs.amount>=1500", []int64{a, r, u}, true},
		{"kwargs.amount<0", []int64{d}, true},
		{"kwargs.amount>1000000", nil, true},
		{"kwargs.customer.score<0", []int64{a}, true},
		{"kwargs.customer.score>=1000", []int64{c}, true},
		{`kwargs.crm_id>="99990000"`, []int64{a}, true},
		{`kwargs.note>"` + long + `a"`, []int64{b}, true},
		{`kwargs.note>"` + long + `c"`, nil, true},
		{`kwargs.note<="` + long + `b"`, []int64{b}, true},
		{"kwargs.tags[1]>10", []int64{b}, true},
		{"kwargs.tags.0>10", nil, true},
		{"args[1].qty>10", []int64{b}, true},
		{"args.1.qty<=3", []int64{a}, true},
		{`args.0>="ORD-2"`, []int64{b, r, u}, true},
		{`kwargs."odd.key">5`, []int64{c}, true},
		{`kwargs."a\\b">8`, []int64{c}, true},
		{"kwargs.big[299]>298", []int64{d}, true},
		{"kwargs.amount>999 and kwargs.currency:EUR", []int64{a, r}, true},
		{"kwargs.amount>999 and not kwargs.currency:EUR", []int64{b, u}, true},
		{"kwargs.amount>999 or kwargs.customer.score<0", []int64{a, b, r, u}, true},
		{"kwargs.amount:1500 or kwargs.amount<0", []int64{a, d}, true},
		{`kwargs.amount:2000 or kwargs.amount<0`, []int64{c, d}, true}, // "2000" is the string's
		{"kwargs.amount>999 charge", []int64{a, b, r}, true},           // u has no search row yet
		{"not kwargs.amount<=999", []int64{a, b, c, r, none, u}, false},
		{"kwargs.amount>999 or not kwargs.currency:EUR", []int64{a, b, c, d, r, none, u}, false},
		{"kwargs.amount>999 or kwargs.capture:true", []int64{a, b, r, u}, false},
		{"kwargs.currency:EUR", []int64{a, r}, false}, // an equality alone: GIN serves it
	} {
		f := dlq.Filter{Q: tc.q}
		if err := f.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.q, err)
		}
		probed, err := letters.ArgProbe{}.Filter(ctx, db.DB, f)
		if err != nil || (probed.Candidates != nil) != tc.probed {
			t.Errorf("%q: probed to %+v (err %v), want narrowed %v", tc.q, probed.Candidates, err, tc.probed)
		}
		var pendingWant []int64
		for _, id := range tc.want {
			if id != r {
				pendingWant = append(pendingWant, id)
			}
		}
		for _, m := range probeModes {
			l := stores.Letters.WithArgProbe(m.probe)
			ops := stores.Operations.WithArgProbe(m.probe)
			what := fmt.Sprintf("%q (probe %s)", tc.q, m.name)
			page, err := l.ListDeadLetters(ctx, f)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := letterIDs(page.Letters); !sameSet(got, tc.want) {
				t.Errorf("%s listed %v, want %v", what, got, tc.want)
			}
			if n, err := l.CountDeadLetters(ctx, f); err != nil || n.N != int64(len(tc.want)) || !n.Exact {
				t.Errorf("%s counted %+v (err %v), want %d", what, n, err, len(tc.want))
			}
			if n, err := l.CountNewer(ctx, f, 0); err != nil || n != int64(len(tc.want)) {
				t.Errorf("%s counted %d newer (err %v), want %d", what, n, err, len(tc.want))
			}
			var exported []int64
			if err := l.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error { exported = append(exported, d.ID); return nil }); err != nil ||
				!sameSet(exported, tc.want) {
				t.Errorf("%s exported %v (err %v), want %v", what, exported, err, tc.want)
			}
			pending := f
			pending.Status = dlq.StatusPending
			p, err := ops.PreviewSelection(ctx, dlq.Selection{Filter: &pending}, 10)
			if err != nil || p.Matched != int64(len(pendingWant)) || !sameSet(letterIDs(p.Sample), pendingWant) {
				t.Errorf("%s: bulk preview matched %d, sampled %v (err %v), want %v", what, p.Matched, letterIDs(p.Sample), err, pendingWant)
			}
		}
	}
}

// A bulk discard by a rare range discards exactly the letters it matches,
// batch by batch, through the probe, an unindexed letter included.
func TestArgumentRangeBulkDiscardIsExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	var want []int64
	for i := range 40 {
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Kwargs: fmt.Sprintf(`{"amount": %d.25}`, i*10)})
		if float64(i*10)+0.25 > 300 {
			want = append(want, id)
		}
		if i%7 == 0 {
			unindex(t, db.DB, id)
		}
	}
	f := dlq.Filter{Q: "kwargs.amount>300", Status: dlq.StatusPending}
	if probed, err := (letters.ArgProbe{}).Filter(ctx, db.DB, f); err != nil || probed.Candidates == nil {
		t.Fatalf("probe %+v, %v; want candidates", probed.Candidates, err)
	}
	op, err := stores.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
		Reason: "range test", Selection: dlq.Selection{Filter: &f}})
	if err != nil {
		t.Fatal(err)
	}
	if op.Matched != int64(len(want)) {
		t.Fatalf("the operation matched %d, want %d", op.Matched, len(want))
	}
	for range 20 {
		res, err := stores.Operations.RunOperationBatch(ctx, op.ID, 3, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if res.Finished {
			break
		}
	}
	var got []int64
	if err := db.Select(&got, `SELECT dead_letter_id FROM dead_letter_outcomes WHERE discarded_at IS NOT NULL ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if !sameSet(got, want) {
		t.Errorf("discarded %v, want %v", got, want)
	}
}

// sameSet reports whether a and b hold the same ids, in any order.
func sameSet(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b) || (len(a) == 0 && len(b) == 0)
}
