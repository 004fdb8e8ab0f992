package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// editFixture files letters as the worker does: grouped by the store's
// grouper, under the group their id means now (merges redirect).
type editFixture struct {
	db    *storetest.DB
	store *storetest.Stores
	at    time.Time
	n     int
}

func newEditFixture(t *testing.T) *editFixture {
	db := storetest.NewDB(t)
	return &editFixture{db: db, store: storetest.NewStores(db.DB), at: time.Now().UTC().Add(-6 * time.Hour).Truncate(time.Second)}
}

// letter dead-letters one letter of task and class with msg through a
// fresh grouper (a worker that has read every change) and returns its
// group. Each letter fails a minute after the last; o sets the rest.
func (f *editFixture) letter(t *testing.T, task, class, msg string, o storetest.Letter) string {
	t.Helper()
	ctx := context.Background()
	fp, err := storetest.NewStores(f.db.DB).Groups.GroupLetter(ctx, grouping.Letter{Task: task, Class: class, Message: msg, Traceback: o.Traceback})
	if err != nil {
		t.Fatal(err)
	}
	if fp, _, err = f.store.Groups.GroupSurvivor(ctx, fp); err != nil {
		t.Fatal(err)
	}
	f.n++
	o.Task, o.ErrorClass, o.Message, o.Fingerprint = task, class, msg, fp
	if o.FailedAt.IsZero() {
		o.FailedAt = f.at.Add(time.Duration(f.n) * time.Minute)
	}
	storetest.InsertDeadLetter(t, f.db.DB, o)
	return fp
}

func carrierMsg(carrier string) string {
	return "shipment rejected by carrier " + carrier + ": address not verified"
}

// shipments files n letters per carrier, in turns, and returns each
// carrier's group.
func (f *editFixture) shipments(t *testing.T, n map[string]int, o storetest.Letter) map[string]string {
	t.Helper()
	out := map[string]string{}
	for left := true; left; {
		left = false
		for _, c := range slices.Sorted(func(yield func(string) bool) {
			for c := range n {
				if !yield(c) {
					return
				}
			}
		}) {
			if n[c] > 0 {
				out[c] = f.letter(t, "orders.ship", "CarrierError", carrierMsg(c), o)
				n[c]--
				left = true
			}
		}
	}
	return out
}

// assertRecounted compares every group's summary row and the hourly
// inflow with a recount from the letters: totals, pending, first and last
// seen and the sample (the newest letter's message).
func assertRecounted(t *testing.T, db *storetest.DB) {
	t.Helper()
	storetest.AssertSummariesMatch(t, db)
	var n int
	err := db.Get(&n, `
		SELECT count(*) FROM (
			SELECT fingerprint, min(task) AS task, min(error_class) AS error_class,
				(array_agg(error_message ORDER BY failed_at DESC, id DESC))[1] AS sample_message,
				count(*) AS total, count(*) FILTER (WHERE status = 'pending') AS pending,
				min(failed_at) AS first_seen, max(failed_at) AS last_seen
			FROM dead_letters GROUP BY fingerprint
		) real FULL JOIN error_groups kept USING (fingerprint)
		WHERE (real.task, real.error_class, real.sample_message, real.total, real.pending, real.first_seen, real.last_seen)
			IS DISTINCT FROM (kept.task, kept.error_class, kept.sample_message, kept.total, kept.pending, kept.first_seen, kept.last_seen)`)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d error groups differ from a recount of their letters", n)
	}
	if err := db.Get(&n, `
		SELECT count(*) FROM (
			SELECT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue, count(*) AS n, min(task) AS task
			FROM dead_letter_records GROUP BY 1, 2, 3
		) real FULL JOIN dead_letter_inflow kept USING (fingerprint, hour, queue)
		WHERE (real.n, real.task) IS DISTINCT FROM (kept.n, kept.task)`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d inflow rows differ from a recount of the letters", n)
	}
}

func audits(t *testing.T, db *storetest.DB, action string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM audit_events WHERE action = $1`, action); err != nil {
		t.Fatal(err)
	}
	return n
}

func groupOfLetter(t *testing.T, f *editFixture, msg string) string {
	t.Helper()
	var fps []string
	if err := f.db.Select(&fps, `SELECT DISTINCT fingerprint FROM dead_letter_records WHERE error_message = $1`, msg); err != nil {
		t.Fatal(err)
	}
	if len(fps) != 1 {
		t.Fatalf("letters %q are in groups %v, want one", msg, fps)
	}
	return fps[0]
}

var priya = dlq.Actor{Name: "priya"}

func TestMergeErrorGroups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("SameShapeWidensTheOlderSurvivor", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		g := f.shipments(t, map[string]int{"dhl": 3, "ups": 2}, storetest.Letter{})
		if g["dhl"] == g["ups"] {
			t.Fatalf("two carriers are one group before the merge: %v", g)
		}
		// Asked from the younger group's page: the older keeps its id.
		res, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: g["ups"], Groups: []string{g["dhl"]}, Actor: priya, Reason: "one carrier outage"})
		if err != nil {
			t.Fatal(err)
		}
		want := dlq.GroupMergeResult{Survivor: g["dhl"], Merged: []string{g["ups"]},
			Template: "shipment rejected by carrier <*> address not verified"}
		if fmt.Sprint(res) != fmt.Sprint(want) {
			t.Fatalf("merge = %+v, want %+v", res, want)
		}
		assertRecounted(t, f.db)
		if got := groupOfLetter(t, f, carrierMsg("ups")); got != g["dhl"] {
			t.Errorf("ups letters in %s, want the survivor %s", got, g["dhl"])
		}
		// Workers file new letters of both, and of a new carrier, in the
		// survivor: its template covers them.
		for _, c := range []string{"ups", "dhl", "fedex"} {
			if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg(c), storetest.Letter{}); got != g["dhl"] {
				t.Errorf("a new %s letter went to %s, want %s", c, got, g["dhl"])
			}
		}
		// The merged template is kept, its merge is the operator's.
		var actor string
		if err := f.db.Get(&actor, `SELECT m.actor FROM error_group_merges m JOIN error_templates t ON t.id = m.from_id WHERE m.from_id = $1`, g["ups"]); err != nil || actor != "priya" {
			t.Errorf("merge of %s recorded by %q (%v), want priya's with the template kept", g["ups"], actor, err)
		}
		// Repeating it, from either page, changes nothing and says the same.
		for _, from := range []string{g["ups"], g["dhl"]} {
			other := g["dhl"]
			if from == other {
				other = g["ups"]
			}
			again, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: from, Groups: []string{other}, Actor: priya, Reason: "one carrier outage"})
			if err != nil || again.Survivor != want.Survivor || again.Template != want.Template {
				t.Errorf("repeat from %s = %+v, %v; want %+v", from, again, err, want)
			}
		}
		if n := audits(t, f.db, dlq.ActionGroupMerge); n != 1 {
			t.Errorf("%d merge audit entries, want 1", n)
		}
		assertRecounted(t, f.db)
	})

	t.Run("FixedWordsKeepTheMergedTemplateMatching", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		sku := f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{})
		qty := f.letter(t, "orders.pack", "KeyError", "'quantity'", storetest.Letter{})
		if sku == qty {
			t.Fatalf("two missing keys are one group before the merge")
		}
		res, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: sku, Groups: []string{qty}, Survivor: qty, Actor: priya, Reason: "one bad import"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Survivor != qty || res.Template != "quantity" {
			t.Fatalf("merge = %+v, want %s surviving as chosen, its template unchanged", res, qty)
		}
		// A missing key is a different bug: the survivor did not widen,
		// but the merged key's letters still go to it.
		if got := f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{}); got != qty {
			t.Errorf("a new 'sku' letter went to %s, want %s", got, qty)
		}
		if got := f.letter(t, "orders.pack", "KeyError", "'price'", storetest.Letter{}); got == qty || got == sku {
			t.Errorf("a third missing key joined the merged groups (%s)", got)
		}
		assertRecounted(t, f.db)
	})

	t.Run("DifferentMessagesDoNotWidenIntoACatchAll", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		label := f.letter(t, "orders.ship", "CarrierError", "label printer offline at depot", storetest.Letter{})
		quota := f.letter(t, "orders.ship", "CarrierError", "daily quota exceeded for account", storetest.Letter{})
		res, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: label, Groups: []string{quota}, Actor: priya, Reason: "one dashboard"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Template != "label printer offline at depot" {
			t.Errorf("survivor's template %q, want it unchanged: the two share no word", res.Template)
		}
		// Both still lead to the survivor; a third message does not.
		for _, msg := range []string{"label printer offline at depot", "daily quota exceeded for account"} {
			if got := f.letter(t, "orders.ship", "CarrierError", msg, storetest.Letter{}); got != res.Survivor {
				t.Errorf("a new %q letter went to %s, want %s", msg, got, res.Survivor)
			}
		}
		if got := f.letter(t, "orders.ship", "CarrierError", "customs form rejected by broker", storetest.Letter{}); got == res.Survivor {
			t.Errorf("an unrelated message of the same length joined the merged group")
		}
		assertRecounted(t, f.db)
	})

	t.Run("BadRequestsAreRefused", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		g := f.shipments(t, map[string]int{"dhl": 1, "ups": 1}, storetest.Letter{})
		other := f.letter(t, "orders.refund", "CarrierError", carrierMsg("dhl"), storetest.Letter{})
		for _, c := range []struct {
			name  string
			p     dlq.GroupMergeParams
			code  string
			field string
		}{
			{"NoReason", dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{g["ups"]}}, dlq.EInvalid, "reason"},
			{"NoGroups", dlq.GroupMergeParams{Group: g["dhl"], Reason: "x"}, dlq.EInvalid, "groups"},
			{"IntoItself", dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{g["dhl"]}, Reason: "x"}, dlq.EInvalid, "groups"},
			{"UnknownGroup", dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{"0123456789abcdef"}, Reason: "x"}, dlq.EInvalid, "groups"},
			{"AnotherTask", dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{other}, Reason: "x"}, dlq.EInvalid, "groups"},
			{"SurvivorNotMerged", dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{g["ups"]}, Survivor: other, Reason: "x"}, dlq.EInvalid, "survivor"},
			{"UnknownPage", dlq.GroupMergeParams{Group: "0123456789abcdef", Groups: []string{g["ups"]}, Reason: "x"}, dlq.ENotFound, ""},
		} {
			_, err := f.store.Groups.MergeErrorGroups(ctx, c.p)
			if dlq.ErrorCode(err) != c.code || c.field != "" && dlq.ErrorFields(err)[c.field] == "" {
				t.Errorf("%s: %v (code %s, fields %v), want %s on %q", c.name, err, dlq.ErrorCode(err), dlq.ErrorFields(err), c.code, c.field)
			}
		}
		if n := audits(t, f.db, dlq.ActionGroupMerge); n != 0 {
			t.Errorf("%d merges audited after refusals", n)
		}
	})
}

func TestSplitErrorGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// split files letters of three carriers (one group), some settled,
	// over several hours and two queues, and one letter that does not fit
	// the template, then splits the group by carrier.
	split := func(t *testing.T) (*editFixture, string, dlq.GroupSplitResult) {
		f := newEditFixture(t)
		var groups []string
		for i, c := range []string{"dhl", "ups", "fedex", "dhl", "ups", "fedex", "dhl", "ups", "fedex", "dhl", "ups", "dhl", "dhl"} {
			queue := []string{"default", "priority"}[i%2]
			groups = append(groups, f.letter(t, "orders.ship", "CarrierError", carrierMsg(c),
				storetest.Letter{Queue: queue, FailedAt: f.at.Add(time.Duration(i) * 25 * time.Minute)}))
		}
		f.store.Groups.SweepMergedGroups(ctx)
		group := groups[len(groups)-1]
		if n := groupOfLetter(t, f, carrierMsg("ups")); n != group {
			t.Fatalf("three carriers in groups %v, want one", groups)
		}
		storetest.Settle(t, f.db.DB, storetest.Outcome{Status: "discarded"}, "error_message = $1 AND id % 2 = 0", carrierMsg("ups"))
		storetest.Settle(t, f.db.DB, storetest.Outcome{Status: "replayed"}, "error_message = $1 AND id % 2 = 1", carrierMsg("dhl"))
		storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: "orders.ship", ErrorClass: "CarrierError",
			Fingerprint: group, Message: "carrier api unreachable", FailedAt: f.at.Add(-time.Hour)})
		assertRecounted(t, f.db)
		tpl, err := f.store.Groups.GroupTemplate(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		var merged []string
		if err := f.db.Select(&merged, `SELECT from_id FROM error_group_merges WHERE into_id = $1`, group); err != nil {
			t.Fatal(err)
		}
		p := slices.Index(tpl.Tokens, grouping.Wildcard)
		res, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: p, Actor: priya, Reason: "three carriers, three bugs"})
		if err != nil {
			t.Fatal(err)
		}
		// The grouper had merged ups and fedex into dhl when it learned
		// the variable: their old ids come back with their letters.
		for _, part := range res.Parts[1:] {
			if !slices.Contains(merged, part.Group) {
				t.Errorf("part %s has the new id %s, want its old group's id back (one of %v)", part.Word, part.Group, merged)
			}
			if into, _, err := f.store.Groups.GroupSurvivor(ctx, part.Group); err != nil || into != part.Group {
				t.Errorf("part %s's id still leads to %s (%v)", part.Word, into, err)
			}
		}
		return f, group, res
	}

	t.Run("DividesLettersAndRecountsEverySummary", func(t *testing.T) {
		t.Parallel()
		f, group, res := split(t)
		if len(res.Parts) != 3 || res.Parts[0].Word != "dhl" || res.Parts[0].Group != group || res.Parts[0].Letters != 6 {
			t.Fatalf("split = %+v, want dhl (6 letters) keeping %s and two more parts", res, group)
		}
		for _, part := range res.Parts {
			if got := groupOfLetter(t, f, carrierMsg(part.Word)); got != part.Group {
				t.Errorf("%s letters in %s, want %s", part.Word, got, part.Group)
			}
			if len(part.Group) != 16 {
				t.Errorf("part %s has id %q, want 16 hex digits", part.Word, part.Group)
			}
		}
		if got := groupOfLetter(t, f, "carrier api unreachable"); got != group {
			t.Errorf("the letter that fits no part went to %s, want it kept in %s", got, group)
		}
		assertRecounted(t, f.db)
		var details string
		if err := f.db.Get(&details, `SELECT details::text FROM audit_events WHERE action = 'group_split' AND actor = 'priya'`); err != nil {
			t.Fatal(err)
		}
		for _, part := range res.Parts {
			if !strings.Contains(details, fmt.Sprintf("%q: %q", part.Word, part.Group)) {
				t.Errorf("audit details %s do not map %s to %s", details, part.Word, part.Group)
			}
		}
		// A repeat answers the same and audits nothing more.
		again, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: res.Position, Actor: priya, Reason: "three carriers, three bugs"})
		if err != nil || fmt.Sprint(again) != fmt.Sprint(res) {
			t.Errorf("repeat = %+v, %v; want %+v", again, err, res)
		}
		if n := audits(t, f.db, dlq.ActionGroupSplit); n != 1 {
			t.Errorf("%d split audit entries, want 1", n)
		}
	})

	t.Run("WorkersHonourIt", func(t *testing.T) {
		t.Parallel()
		f, _, res := split(t)
		for _, part := range res.Parts {
			if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg(part.Word), storetest.Letter{}); got != part.Group {
				t.Errorf("a new %s letter went to %s, want %s", part.Word, got, part.Group)
			}
		}
		// Three new carriers would make a variable of any other word:
		// they stay out of the parts.
		for _, c := range []string{"dpd", "gls", "hermes", "tnt"} {
			got := f.letter(t, "orders.ship", "CarrierError", carrierMsg(c), storetest.Letter{})
			if slices.ContainsFunc(res.Parts, func(p dlq.GroupSplitPart) bool { return p.Group == got }) {
				t.Errorf("new carrier %s went to part %s", c, got)
			}
		}
		for _, part := range res.Parts {
			if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg(part.Word), storetest.Letter{}); got != part.Group {
				t.Errorf("after new carriers, a %s letter went to %s, want %s", part.Word, got, part.Group)
			}
		}
		assertRecounted(t, f.db)
	})

	t.Run("AWorkerOnItsOldCopyCannotUndoIt", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		worker := storetest.NewStores(f.db.DB) // learns before the split, re-reads later
		var group string
		for _, c := range []string{"dhl", "ups", "fedex", "dhl"} {
			id, err := worker.Groups.GroupLetter(ctx, grouping.Letter{Task: "orders.ship", Class: "CarrierError", Message: carrierMsg(c)})
			if err != nil {
				t.Fatal(err)
			}
			group = id
			storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: "orders.ship", ErrorClass: "CarrierError", Message: carrierMsg(c), Fingerprint: id})
		}
		f.store.Groups.SweepMergedGroups(ctx)
		tpl, err := f.store.Groups.GroupTemplate(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		p := slices.Index(tpl.Tokens, grouping.Wildcard)
		if _, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: p, Actor: priya, Reason: "split"}); err != nil {
			t.Fatal(err)
		}
		// The worker widens its copy at another word (carriers named by
		// ids, which match its old variable): the store keeps the split,
		// whatever the worker learned.
		for i, end := range []string{"found", "checked", "valid"} {
			if _, err := worker.Groups.GroupLetter(ctx, grouping.Letter{Task: "orders.ship", Class: "CarrierError",
				Message: fmt.Sprintf("shipment rejected by carrier car_XBBATYEZ%d: address not %s", i, end)}); err != nil {
				t.Fatal(err)
			}
		}
		after, err := f.store.Groups.GroupTemplate(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if after.Tokens[p] != "dhl" || !after.Fixed[p] {
			t.Errorf("the split word became %q (fixed %v): a worker's old copy undid the split", after.Tokens[p], after.Fixed[p])
		}
	})

	t.Run("MergingThePartsBackUndoesIt", func(t *testing.T) {
		t.Parallel()
		f, group, res := split(t)
		others := []string{res.Parts[1].Group, res.Parts[2].Group}
		merged, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: group, Groups: others, Actor: priya, Reason: "one bug after all"})
		if err != nil {
			t.Fatal(err)
		}
		if merged.Survivor != group || !strings.Contains(merged.Template, "carrier <*> address") {
			t.Fatalf("merge back = %+v, want %s with the carrier a variable again", merged, group)
		}
		tpl, err := f.store.Groups.GroupTemplate(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		if tpl.Fixed[res.Position] {
			t.Errorf("the merged position is still fixed")
		}
		assertRecounted(t, f.db)
		if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg("gls"), storetest.Letter{}); got != group {
			t.Errorf("a new carrier went to %s, want %s", got, group)
		}
		// Splitting again is a new split, which gives the parts their
		// ids back.
		again, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: res.Position, Actor: priya, Reason: "two bugs after all"})
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range res.Parts {
			if !slices.ContainsFunc(again.Parts, func(p dlq.GroupSplitPart) bool { return p.Word == part.Word && p.Group == part.Group }) {
				t.Errorf("second split %+v does not give %s its id %s back", again.Parts, part.Word, part.Group)
			}
		}
		assertRecounted(t, f.db)
	})

	t.Run("BadRequestsAreRefused", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		g := f.shipments(t, map[string]int{"dhl": 2, "ups": 1, "fedex": 1}, storetest.Letter{})
		one := f.letter(t, "orders.pack", "KeyError", "'sku'", storetest.Letter{})
		tpl, err := f.store.Groups.GroupTemplate(ctx, g["dhl"])
		if err != nil {
			t.Fatal(err)
		}
		p := slices.Index(tpl.Tokens, grouping.Wildcard)
		for _, c := range []struct {
			name string
			p    dlq.GroupSplitParams
			code string
		}{
			{"NoReason", dlq.GroupSplitParams{Group: g["dhl"], Position: p}, dlq.EInvalid},
			{"NotAVariable", dlq.GroupSplitParams{Group: g["dhl"], Position: 0, Reason: "x"}, dlq.EInvalid},
			{"OutOfRange", dlq.GroupSplitParams{Group: g["dhl"], Position: 99, Reason: "x"}, dlq.EInvalid},
			{"NothingToSplit", dlq.GroupSplitParams{Group: one, Position: 0, Reason: "x"}, dlq.EInvalid},
			{"UnknownGroup", dlq.GroupSplitParams{Group: "0123456789abcdef", Position: p, Reason: "x"}, dlq.ENotFound},
		} {
			if _, err := f.store.Groups.SplitErrorGroup(ctx, c.p); dlq.ErrorCode(err) != c.code {
				t.Errorf("%s: %v (code %s), want %s", c.name, err, dlq.ErrorCode(err), c.code)
			}
		}
	})

	t.Run("ConcurrentDeadLetteringLosesNothing", func(t *testing.T) {
		t.Parallel()
		f := newEditFixture(t)
		g := f.shipments(t, map[string]int{"dhl": 200, "ups": 150, "fedex": 100}, storetest.Letter{})
		group := g["dhl"]
		tpl, err := f.store.Groups.GroupTemplate(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		p := slices.Index(tpl.Tokens, grouping.Wildcard)
		stop := make(chan struct{})
		var inserted atomic.Int64
		var wg sync.WaitGroup
		var insertErr error
		wg.Add(1)
		go func() {
			// A worker that has not re-read the templates keeps filing
			// letters of every carrier under the group, one per statement.
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				carrier := []string{"dhl", "ups", "fedex"}[i%3]
				_, err := f.db.Exec(`INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message,
					attempts, max_attempts, reason, fingerprint, enqueued_at, failed_at)
					VALUES (1000000 + $1, 'default', 'orders.ship', '[]', '{}', 'CarrierError', $2, 1, 1, 'permanent', $3, now(), now())`,
					i, carrierMsg(carrier), group)
				if err != nil {
					insertErr = err
					return
				}
				inserted.Add(1)
			}
		}()
		time.Sleep(20 * time.Millisecond)
		res, err := f.store.Groups.SplitErrorGroup(ctx, dlq.GroupSplitParams{Group: group, Position: p, Actor: priya, Reason: "split under load"})
		time.Sleep(20 * time.Millisecond)
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if insertErr != nil {
			t.Fatalf("dead-lettering beside the split: %v", insertErr)
		}
		if len(res.Parts) != 3 {
			t.Fatalf("split = %+v, want three parts", res)
		}
		var letters int64
		if err := f.db.Get(&letters, `SELECT count(*) FROM dead_letter_records`); err != nil {
			t.Fatal(err)
		}
		if letters != 450+inserted.Load() {
			t.Errorf("%d letters after the split, want %d", letters, 450+inserted.Load())
		}
		if inserted.Load() == 0 {
			t.Errorf("no letter was dead-lettered beside the split")
		}
		assertRecounted(t, f.db)
	})
}

func TestUnmergeErrorGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newEditFixture(t)
	g := f.shipments(t, map[string]int{"dhl": 3, "ups": 2}, storetest.Letter{})
	if _, err := f.store.Groups.MergeErrorGroups(ctx, dlq.GroupMergeParams{Group: g["dhl"], Groups: []string{g["ups"]}, Actor: priya, Reason: "one outage"}); err != nil {
		t.Fatal(err)
	}
	f.letter(t, "orders.ship", "CarrierError", carrierMsg("ups"), storetest.Letter{}) // into the survivor now
	f.letter(t, "orders.ship", "CarrierError", carrierMsg("gls"), storetest.Letter{})

	edit, err := f.store.Groups.GroupForEdit(ctx, g["dhl"], mask.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if len(edit.Merged) != 1 || edit.Merged[0].ID != g["ups"] || edit.Merged[0].Actor != "priya" {
		t.Fatalf("edit page lists %+v as merged, want %s by priya", edit.Merged, g["ups"])
	}

	p := dlq.GroupUnmergeParams{Group: g["dhl"], From: g["ups"], Actor: priya, Reason: "two outages after all"}
	res, err := f.store.Groups.UnmergeErrorGroup(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if res.Group != g["ups"] || res.Survivor != g["dhl"] || !strings.Contains(res.Template, "carrier ups") {
		t.Fatalf("unmerge = %+v", res)
	}
	// Every ups letter, the one filed after the merge too, is back; the
	// new carrier stays with the survivor, whose template covers it.
	if got := groupOfLetter(t, f, carrierMsg("ups")); got != g["ups"] {
		t.Errorf("ups letters in %s, want %s", got, g["ups"])
	}
	if got := groupOfLetter(t, f, carrierMsg("gls")); got != g["dhl"] {
		t.Errorf("gls letters in %s, want %s", got, g["dhl"])
	}
	assertRecounted(t, f.db)
	if got := f.letter(t, "orders.ship", "CarrierError", carrierMsg("ups"), storetest.Letter{}); got != g["ups"] {
		t.Errorf("a new ups letter went to %s, want %s", got, g["ups"])
	}
	again, err := f.store.Groups.UnmergeErrorGroup(ctx, p)
	if err != nil || again != res {
		t.Errorf("repeat = %+v, %v; want %+v", again, err, res)
	}
	if n := audits(t, f.db, dlq.ActionGroupUnmerge); n != 1 {
		t.Errorf("%d unmerge audit entries, want 1", n)
	}
	// Refusals: not merged into it, merged by the grouper, no reason.
	other := f.letter(t, "orders.ship", "CarrierError", "carrier api unreachable", storetest.Letter{})
	for name, q := range map[string]dlq.GroupUnmergeParams{
		"NeverMerged": {Group: g["dhl"], From: other, Reason: "x"},
		"Itself":      {Group: g["dhl"], From: g["dhl"], Reason: "x"},
		"NoReason":    {Group: g["dhl"], From: g["ups"]},
	} {
		if _, err := f.store.Groups.UnmergeErrorGroup(ctx, q); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}
