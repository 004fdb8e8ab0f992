package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// secretLetter is a letter whose arguments hide values at every depth,
// inside arrays too, and whose error message and traceback quote them,
// as a careless decode error does.
var secretLetter = storetest.Letter{
	Task:   "billing.charge",
	Args:   `[{"customer": "c-9", "Password": "hunter2-SECRETPW"}, [{"ssn": "078-05-1120"}]]`,
	Kwargs: `{"payment": {"card_last4": "7552", "amount": 12}, "auth": {"Authorization": {"bearer": "nested-bearer-xyz"}}, "note": "visible-note", "pin_token": 98765}`,
	Message: `invalid kwargs {"password": "hunter2-SECRETPW", "ssn": "078-05-1120"} for order ord_1: card ending 7552 declined, ` +
		`bearer nested-bearer-xyz, pin 98765, mail alice@example.com`,
	Traceback: "Traceback:\n  File charge.py: decode(\"hunter2-SECRETPW\")\n  at 7552",
}

// Search matches only what the searcher may see: no masked value, however
// deep, can be found by searching for it or for a prefix of it, in the
// arguments or in the error message; what is shown still matches.
func TestSearchFindsNoMaskedValue(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	id := storetest.InsertDeadLetter(t, db.DB, secretLetter)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "unrelated"})

	hidden := []string{
		"hunter2-SECRETPW", "SECRETPW", "078-05-1120", `"ssn": "0`, `"ssn": "07`, "nested-bearer", "98765",
		`"card_last4": "7`, "ending 7552", `"bearer": "`, `"Password": "h`,
	}
	for _, q := range hidden {
		if got := searchIDs(t, store, q); len(got) != 0 {
			t.Errorf("search for %q found %v: a masked value is searchable", q, got)
		}
	}
	shown := []string{
		"visible-note", "ord_1", `"customer": "c-9"`, `"Password": "•••"`, `"ssn": "•••"`, `"card_last4": "•••"`,
		`"auth": {"Authorization": "•••"}`, "card ending ••• declined", "bearer •••, pin •••", "alice@example.com",
		`"amount": 12`,
	}
	for _, q := range shown {
		if got := searchIDs(t, store, q); !sameIDs(got, id) {
			t.Errorf("search for %q found %v, want [%d]: shown text must match", q, got, id)
		}
	}

	// The message the pages show is the message search matches.
	shownMessage := mask.ForKeys(mask.DefaultKeys).MaskText(secretLetter.Message,
		[]byte(secretLetter.Args), []byte(secretLetter.Kwargs))
	if q := firstRunes(shownMessage, 120); !sameIDs(searchIDs(t, store, q), id) {
		t.Errorf("search for the shown message %q found nothing", q)
	}
}

// When the mask settings change, the search text follows: a rebuilt row
// hides what the new settings hide, and until it is rebuilt it is left out
// of search rather than found by a value the new settings hide.
func TestSearchFollowsMaskPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	id := storetest.InsertDeadLetter(t, db.DB, secretLetter)

	// The stored defaults are the console's defaults: nothing to do.
	changed, err := store.Letters.ApplyMaskPolicy(ctx, mask.ForKeys(mask.DefaultKeys))
	if err != nil || changed {
		t.Fatalf("default policy: changed %v, err %v", changed, err)
	}

	m, err := mask.New(append([]string{"note"}, mask.DefaultKeys...),
		[]string{`[a-z]+@[a-z]+\.com`, `\bord_\d+\b`})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err = store.Letters.ApplyMaskPolicy(ctx, m); err != nil || !changed {
		t.Fatalf("new policy: changed %v, err %v", changed, err)
	}
	if got := searchIDs(t, store, "visible-note"); len(got) != 0 {
		t.Errorf("before the rebuild, search found %v by a value the new policy hides", got)
	}
	// Written under the new policy at once.
	later := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "mail bob@example.com", Kwargs: `{"note": "later-note"}`})
	if got := searchIDs(t, store, "mail •••"); !sameIDs(got, later) {
		t.Errorf("a letter written after the change: search found %v, want [%d]", got, later)
	}
	st, err := store.Letters.MaskPolicy(ctx)
	if err != nil || st.Stale != 1 {
		t.Fatalf("stale %d, err %v; want 1", st.Stale, err)
	}

	n, err := store.Letters.RebuildSearch(ctx, 1, nil)
	if err != nil || n != 1 {
		t.Fatalf("rebuilt %d, err %v", n, err)
	}
	for _, q := range []string{"visible-note", "later-note", "alice@example", "ord_1", "hunter2"} {
		if got := searchIDs(t, store, q); len(got) != 0 {
			t.Errorf("after the rebuild, search for %q found %v", q, got)
		}
	}
	if got := searchIDs(t, store, `"note": "•••"`); !sameIDs(got, later, id) {
		t.Errorf("after the rebuild, search found %v", got)
	}
	if got := searchIDs(t, store, "invalid kwargs"); !sameIDs(got, id) {
		t.Errorf("after the rebuild, search for shown text found %v", got)
	}
	// The Go side hides the same: \b is a word boundary in both.
	shown := m.MaskText(secretLetter.Message, []byte(secretLetter.Args), []byte(secretLetter.Kwargs))
	if strings.Contains(shown, "ord_1") || strings.Contains(shown, "alice@") {
		t.Errorf("shown message %q keeps what the patterns hide", shown)
	}
	if q := firstRunes(shown, 120); !sameIDs(searchIDs(t, store, q), id) {
		t.Errorf("search for the shown message %q found nothing", q)
	}
}

// A pattern PostgreSQL cannot apply as Go does is refused at start, with
// the pattern named, rather than leaving search to find what pages hide.
func TestApplyMaskPolicyRefusesPatterns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := storetest.NewStores(storetest.NewDB(t).DB)
	before, err := store.Letters.MaskPolicy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := mask.New(mask.DefaultKeys, []string{`\pL+-secret`})
	if err != nil {
		t.Fatal(err) // Go reads it
	}
	if _, err := store.Letters.ApplyMaskPolicy(ctx, m); err == nil || !strings.Contains(err.Error(), `\pL+-secret`) ||
		!strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("a pattern PostgreSQL rejects: err %v", err)
	}
	st, err := store.Letters.MaskPolicy(ctx)
	if err != nil || st.Version != before.Version || !slices.Equal(st.Keys, before.Keys) {
		t.Fatalf("a refused policy changed the stored one: %+v, %v", st, err)
	}
}

func firstRunes(s string, n int) string {
	r := []rune(s)
	return string(r[:min(n, len(r))])
}

// Without a policy row (deleted by hand) dead-lettering goes on, and
// search leaves the new letters out rather than match them unmasked.
func TestSearchWithoutPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	if _, err := db.Exec(`DELETE FROM mask_policy`); err != nil {
		t.Fatal(err)
	}
	storetest.InsertDeadLetter(t, db.DB, secretLetter)
	if got := searchIDs(t, storetest.NewStores(db.DB), "hunter2"); len(got) != 0 {
		t.Fatalf("search found %v", got)
	}
}

// escapedLetter quotes its secrets as jsonb prints them: a secret with a
// quote or a backslash is then written escaped in the message, and the
// pages hide that spelling too (TextMask), so search must not find it.
var escapedLetter = storetest.Letter{
	Task:   "probe.leak",
	Kwargs: `{"user": "erin", "password": "p\"q\\r<s>&t-Erin-77", "api_token": "=HYPERLINK(\"http://evil\")"}`,
	Message: `LeakError: invalid kwargs {"user": "erin", "password": "p\"q\\r<s>&t-Erin-77", ` +
		`"api_token": "=HYPERLINK(\"http://evil\")"} (password=p"q\r<s>&t-Erin-77)`,
}

// TestSearchFindsNoEscapedSecret: a secret written escaped in the error
// text, or cut in two by a truncation, is not found by itself, its
// escaped spelling or any prefix of them; what the pages show still is.
func TestSearchFindsNoEscapedSecret(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	id := storetest.InsertDeadLetter(t, db.DB, escapedLetter)
	cut := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{
		Kwargs:  `{"card_number": "4000056655665556"}`,
		Message: "charge failed after card 400005" + mask.TruncatedMark,
	})

	hidden := []string{"Erin-77", `t-Erin`, `p\"q\\r`, `"password": "p`, `HYPERLINK(\"http`, `"api_token": "=`, `"api_token": "=H`, "400005", "card 4"}
	for _, q := range hidden {
		if got := searchIDs(t, store, q); len(got) != 0 {
			t.Errorf("search for %q found %v: a masked value is searchable", q, got)
		}
	}
	for q, want := range map[string]int64{
		`invalid kwargs {"user": "erin", "password": "•••"`: id, `"api_token": "•••"} (password=•••)`: id,
		"charge failed after card •••" + mask.TruncatedMark: cut,
	} {
		if got := searchIDs(t, store, q); !sameIDs(got, want) {
			t.Errorf("search for %q found %v, want [%d]: shown text must match", q, got, want)
		}
	}
	m := mask.ForKeys(mask.DefaultKeys)
	if shown := m.MaskText(escapedLetter.Message, nil, []byte(escapedLetter.Kwargs)); !sameIDs(searchIDs(t, store, shown), id) {
		t.Errorf("search for the shown message %q found nothing", shown)
	}
}
