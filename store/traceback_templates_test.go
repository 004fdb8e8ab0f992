package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// chargeTraceback is a Python traceback whose cause names a request of
// its own and whose last line is the letter's message.
func chargeTraceback(request, message string) string {
	return "Traceback (most recent call last):\n" +
		"  File \"/srv/app/shop/billing/gateway.py\", line 118, in charge\n" +
		"    intent = stripe.PaymentIntent.create(**params)\n" +
		"stripe._error.CardError: Request " + request + ": Your card was declined.\n\n" +
		"The above exception was the direct cause of the following exception:\n\n" +
		"Traceback (most recent call last):\n" +
		"  File \"/srv/app/shop/tasks/payments.py\", line 57, in charge\n" +
		"    raise PaymentDeclined(order_id) from err\n" +
		"PaymentDeclined: " + message
}

// TestTracebacksAreStoredOncePerShape: the letters of one failure, written
// by the worker, by a source over HTTP and by a bulk load, share one
// stored template, and every read (the letter's page, the view, the
// regrouping) gives back each letter's traceback as it was written. A traceback
// that holds the template's marks is stored whole and reads back too.
func TestTracebacksAreStoredOncePerShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	want := map[int64]string{}

	// The worker's dead-lettering statement.
	if err := store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	const jobs = 4
	params := make([]dlq.EnqueueParams, jobs)
	for i := range params {
		params[i] = dlq.EnqueueParams{Task: "billing.charge", MaxAttempts: 1}
	}
	if _, err := store.Queue.EnqueueMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	claimed, err := store.Queue.Claim(ctx, "w1", []string{"default"}, jobs, time.Minute)
	if err != nil || len(claimed) != jobs {
		t.Fatalf("claimed %d, err %v", len(claimed), err)
	}
	outcomes := make([]dlq.DeadOutcome, jobs)
	for i, j := range claimed {
		msg := fmt.Sprintf("card ending 42%02d declined for order ORD-%06d", i, 1000+i)
		tb := chargeTraceback(fmt.Sprintf("req_%012x", 0xabc000+i), msg)
		if i == jobs-1 {
			tb = "a traceback with a \x01 in it, for order ORD-123456"
		}
		outcomes[i] = dlq.DeadOutcome{Lease: dlq.LeaseOf("w1", j), Task: "billing.charge", Reason: dlq.ReasonPermanent,
			Attempt: dlq.Attempt{Attempt: 1, Class: "PaymentDeclined", Message: msg, Traceback: tb}}
	}
	res, err := store.Queue.DeadLetterMany(ctx, "w1", outcomes)
	if err != nil || len(res) != jobs {
		t.Fatalf("dead-lettered %v, err %v", res, err)
	}
	for i, r := range res {
		want[r.LetterID] = outcomes[i].Attempt.Traceback
	}

	// A source over HTTP.
	if err := store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	msg := "card ending 9999 declined for order ORD-777777"
	sent, err := dlq.IngestLetter{ExternalID: "x-1", Task: "billing.charge", Queue: "payments", ErrorClass: "PaymentDeclined",
		Message: msg, Traceback: chargeTraceback("req_0000000fffff", msg), Attempts: 1, MaxAttempts: 1,
		History:  dlq.Attempts{{Attempt: 1, At: time.Now().Add(-time.Minute), Class: "PaymentDeclined", Message: msg, Outcome: dlq.OutcomeDead}},
		FailedAt: time.Now().Add(-time.Minute)}.Normalise(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Sources.Ingest(ctx, "legacy", []dlq.IngestLetter{sent})
	if err != nil || len(got) != 1 {
		t.Fatalf("ingested %v, err %v", got, err)
	}
	want[got[0].ID] = sent.Traceback

	// A bulk load (`redrive seed`).
	loadMsg := "card ending 1111 declined for order ORD-555555"
	loaded := dlq.DeadLetter{Queue: "payments", Task: "billing.charge", Args: []byte(`[]`), Kwargs: []byte(`{}`),
		ErrorClass: "PaymentDeclined", ErrorMessage: loadMsg, Traceback: chargeTraceback("req_000000011111", loadMsg),
		Attempts: 1, MaxAttempts: 1, History: dlq.Attempts{{Attempt: 1, Class: "PaymentDeclined", Message: loadMsg, Outcome: dlq.OutcomeDead}},
		Reason: dlq.ReasonPermanent, Fingerprint: "f", EnqueuedAt: time.Now(), FailedAt: time.Now()}
	if n, err := store.Letters.LoadDeadLetters(ctx, 1, func(int) dlq.DeadLetter { return loaded }); err != nil || n != 1 {
		t.Fatalf("loaded %d, err %v", n, err)
	}
	var loadedID int64
	if err := db.Get(&loadedID, `SELECT max(id) FROM dead_letter_records`); err != nil {
		t.Fatal(err)
	}
	want[loadedID] = loaded.Traceback

	// One template for the one failure; the letter with a mark in its
	// traceback keeps it whole.
	var templates, whole int
	if err := db.Get(&templates, `SELECT count(*) FROM traceback_templates`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&whole, `SELECT count(*) FROM dead_letter_records WHERE traceback_template IS NULL`); err != nil {
		t.Fatal(err)
	}
	if templates != 1 || whole != 1 {
		t.Errorf("%d templates and %d letters stored whole; want 1 and 1", templates, whole)
	}
	var stored int
	if err := db.Get(&stored, `SELECT max(length(traceback)) FROM dead_letter_records WHERE traceback_template IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if stored > 40 {
		t.Errorf("a packed letter keeps %d characters of its traceback; want its few values", stored)
	}

	// Every read gives each traceback back as written.
	for id, tb := range want {
		d, err := store.Letters.GetDeadLetter(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Traceback != tb || d.TracebackLen != len([]rune(tb)) {
			t.Errorf("letter %d's page shows (%d chars):\n%s\nwant:\n%s", id, d.TracebackLen, d.Traceback, tb)
		}
		var viewed string
		if err := db.Get(&viewed, `SELECT traceback FROM dead_letters WHERE id = $1`, id); err != nil || viewed != tb {
			t.Errorf("letter %d through the view: %q (err %v)", id, viewed, err)
		}
	}

	// Regrouping reads packed tracebacks and puts them together itself: the
	// letters the worker grouped as they died keep their groups.
	var before []string
	if err := db.Select(&before, `SELECT fingerprint FROM dead_letter_records WHERE id = ANY($1) ORDER BY id`,
		pq.Array([]int64{res[0].LetterID, res[1].LetterID, res[2].LetterID})); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Groups.RebuildGroups(ctx); err != nil {
		t.Fatal(err)
	}
	var after []string
	if err := db.Select(&after, `SELECT fingerprint FROM dead_letter_records WHERE id = ANY($1) ORDER BY id`,
		pq.Array([]int64{res[0].LetterID, res[1].LetterID, res[2].LetterID})); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) || after[0] != after[2] {
		t.Errorf("groups of one failure's letters: %v before the rebuild, %v after", before, after)
	}
}

// TestPackedTracebackCutAsTheDatabaseCutsIt: a packed traceback longer
// than the detail's cap, put together on the letter's page from its
// template (kept by the store after the first read), is cut at the same
// character as the database cuts the whole text, multi-byte characters
// and all, and its length counted the same way.
func TestPackedTracebackCutAsTheDatabaseCutsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	msg := "card ending 1111 declined for order ORD-555555"
	// Few values, a long shared shape: its values fit the cap, the whole
	// does not.
	frame := "  File \"/srv/app/billing/größe.py\", line 88, in charge_ünit\n    raise Declined(msg)\n"
	tb := "Traceback (most recent call last):\n" + strings.Repeat(frame, dlq.TracebackCap/len([]rune(frame))+50) + "Declined: " + msg
	letter := dlq.DeadLetter{Queue: "payments", Task: "billing.charge", Args: []byte(`[]`), Kwargs: []byte(`{}`),
		ErrorClass: "Declined", ErrorMessage: msg, Traceback: tb, Attempts: 1, MaxAttempts: 1,
		History: dlq.Attempts{{Attempt: 1, Class: "Declined", Message: msg, Outcome: dlq.OutcomeDead}},
		Reason:  dlq.ReasonPermanent, Fingerprint: "f", EnqueuedAt: time.Now(), FailedAt: time.Now()}
	if n, err := store.Letters.LoadDeadLetters(ctx, 2, func(int) dlq.DeadLetter { return letter }); err != nil || n != 2 {
		t.Fatalf("loaded %d, err %v", n, err)
	}
	var ids []int64
	if err := db.Select(&ids, `SELECT id FROM dead_letter_records WHERE traceback_template IS NOT NULL ORDER BY id`); err != nil || len(ids) != 2 {
		t.Fatalf("packed letters %v, err %v", ids, err)
	}
	var want struct {
		Cut string `db:"cut"`
		Len int    `db:"len"`
	}
	if err := db.Get(&want, `SELECT left(traceback, $2) || $3 AS cut, length(traceback) AS len FROM dead_letters WHERE id = $1`,
		ids[0], dlq.TracebackCap, mask.TruncatedMark); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids { // the second reads the template the first kept
		d, err := store.Letters.GetDeadLetter(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Traceback != want.Cut || d.TracebackLen != want.Len || !d.TracebackTruncated() {
			t.Errorf("letter %d: %d characters of %d (truncated %v); want the database's cut, %d of %d",
				id, len([]rune(d.Traceback)), d.TracebackLen, d.TracebackTruncated(), len([]rune(want.Cut)), want.Len)
		}
	}
}
