package store_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// Qualifiers on the arguments select exactly the letters whose value at
// the path compares as asked, in the list, its count and a bulk
// selection's preview alike.
func TestArgumentQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	now := time.Now()
	letter := func(args, kwargs string, ago time.Duration) int64 {
		message := "charge failed"
		if ago == 5*time.Minute {
			message = "charge failed: needle in the message"
		}
		return storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Args: args, Kwargs: kwargs, FailedAt: now.Add(-ago),
			Message: message})
	}
	de := letter(`["ORD-1", {"sku": "A-1"}]`, `{"customer": {"id": "cus_9"}, "country": "DE", "amount": 150, "tags": ["vip"]}`, 5*time.Minute)
	fr := letter(`["ORD-2", {"sku": "B-2"}]`, `{"customer": {"id": "cus_7"}, "country": "FR", "amount": "90", "day": "2026-01-02"}`, 4*time.Minute)
	str := letter(`[42]`, `{"country": "DE", "amount": 100.0, "note": "Jane \"JD\" Doe"}`, 3*time.Minute)
	none := letter(`[]`, `{}`, 2*time.Minute)
	swapped := letter(`[{"sku": "A-1"}, "ORD-1"]`, `{"country": "de"}`, time.Minute)

	for _, tc := range []struct {
		q    string
		want []int64 // newest first
	}{
		{"kwargs.country:DE", []int64{str, de}},
		{"kwargs.country:de", []int64{swapped}},
		{"kwargs.customer.id:cus_9", []int64{de}},
		{"kwargs.amount:100", []int64{str}},             // 100.0 is the number 100
		{"kwargs.amount:90", []int64{fr}},               // the string "90" too
		{`kwargs.amount:"150"`, nil},                    // quoted: the string only
		{"kwargs.amount>99", []int64{str, de}},          // numbers only: "90" is text
		{"kwargs.amount<=100", []int64{str}},            // 150 is not
		{`kwargs.day>="2026-01-01"`, []int64{fr}},       // text compares as text
		{"args.0:ORD-1", []int64{de}},                   // position 0 only, not swapped's position 1
		{"args[1].sku:A-1", []int64{de}},                // a key inside a position
		{"args.0:42", []int64{str}},                     // a number in args
		{"kwargs.tags[0]:vip", []int64{de}},             // a position inside kwargs
		{`kwargs.note:"Jane \"JD\" Doe"`, []int64{str}}, // quotes inside a quoted value
		{"kwargs.country:DE or kwargs.country:FR", []int64{str, fr, de}},
		{"not kwargs.country:DE", []int64{swapped, none, fr}}, // no country counts as not DE
		{"kwargs.country!=DE", []int64{swapped, none, fr}},
		{"(kwargs.country:DE or kwargs.country:FR) and not kwargs.amount>120", []int64{str, fr}},
		{"kwargs.country:DE customer", []int64{de}}, // with free text: only de's text is indexed below
		{"kwargs.country:XX", nil},
	} {
		f, err := handlers.ParseFilter(url.Values{"q": {tc.q}, "status": {"all"}}, now)
		if err != nil {
			t.Fatalf("%q: %v", tc.q, err)
		}
		page, err := store.Letters.ListDeadLetters(ctx, f)
		if err != nil {
			t.Fatalf("%q: %v", tc.q, err)
		}
		var got []int64
		for _, l := range page.Letters {
			got = append(got, l.ID)
		}
		if !sameIDs(got, tc.want...) {
			t.Errorf("%q found %v, want %v", tc.q, got, tc.want)
		}
		count, err := store.Letters.CountDeadLetters(ctx, f)
		if err != nil || count.N != int64(len(tc.want)) || !count.Exact {
			t.Errorf("%q counted %+v (err %v), want %d", tc.q, count, err, len(tc.want))
		}
		pending := f
		pending.Status = dlq.StatusPending
		p, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: &pending}, 10)
		if err != nil || p.Matched != int64(len(tc.want)) || len(p.Sample) != len(tc.want) {
			t.Errorf("%q: bulk preview matched %d with %d in its sample (err %v), want %d", tc.q, p.Matched, len(p.Sample), err, len(tc.want))
		}
	}
}

// A key the masking policy hides matches nothing through a qualifier,
// whoever builds the filter: its values are shown to nobody, so neither a
// page nor a count may tell them. The console refuses such a search with
// a message first (dlq.Filter.MaskedQualifier).
func TestArgumentQueriesNeverMatchMaskedKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	policy := mask.ForKeys([]string{"card", "secret"})
	if _, err := store.Letters.ApplyMaskPolicy(ctx, policy); err != nil {
		t.Fatal(err)
	}
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Args: `[{"Card_Number": "4242"}]`,
		Kwargs: `{"card_last4": "4242", "payment": {"client_SECRET": "s3"}, "country": "DE"}`})

	for _, q := range []string{"kwargs.card_last4:4242", "kwargs.Card_Last4:4242", "kwargs.payment.client_SECRET:s3",
		"args[0].Card_Number:4242", "kwargs.country:DE and kwargs.card_last4>1000", "kwargs.country:DE or not kwargs.card_last4:1"} {
		f := dlq.Filter{Q: q, Status: dlq.StatusPending}
		if err := f.Validate(); err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if msg := f.MaskedQualifier(policy); msg == "" {
			t.Errorf("%q: MaskedQualifier says nothing", q)
		}
		page, err := store.Letters.ListDeadLetters(ctx, f)
		if err != nil || len(page.Letters) != 0 {
			t.Errorf("%q listed %d letters (err %v), want none", q, len(page.Letters), err)
		}
		if c, err := store.Letters.CountDeadLetters(ctx, f); err != nil || c.N != 0 {
			t.Errorf("%q counted %+v (err %v), want 0", q, c, err)
		}
		if p, err := store.Operations.PreviewSelection(ctx, dlq.Selection{Filter: &f}, 10); err != nil || p.Matched != 0 {
			t.Errorf("%q: bulk preview matched %d (err %v), want 0", q, p.Matched, err)
		}
	}
	// The same letter is found by a key the policy leaves alone.
	f := dlq.Filter{Q: "kwargs.country:DE", Status: dlq.StatusPending}
	if page, err := store.Letters.ListDeadLetters(ctx, f); err != nil || len(page.Letters) != 1 || f.MaskedQualifier(policy) != "" {
		t.Fatalf("kwargs.country:DE listed %d (err %v)", len(page.Letters), err)
	}
}
