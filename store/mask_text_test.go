package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/lib/pq"

	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
)

// maskCases are error texts with the arguments of their letter: the pages
// (Go, package mask) and the search (SQL, 00102_search.sql) must
// hide the same in each. The table lives here, with both its tests, since
// the SQL half needs the store's database.
var maskCases = []struct {
	name, msg, args, kwargs, want string
	patterns                      []string
}{
	{name: "QuotedPayload", msg: `invalid kwargs {"password": "hunter2-pw"}`, kwargs: `{"password": "hunter2-pw"}`,
		want: `invalid kwargs {"password": "•••"}`},
	{name: "ShortValuesStay", msg: "pin 123 for card 4242", kwargs: `{"pin_token": "123", "card": "4242"}`,
		want: "pin 123 for card •••"},
	{name: "NestedAndArrays", msg: "a=alpha-1 b=beta-22 c=gamma",
		args: `[{"x": [{"secret": {"deep": ["alpha-1"]}}]}]`, kwargs: `{"list": [{"ssn": "beta-22"}], "gamma": "gamma"}`,
		want: "a=••• b=••• c=gamma"},
	{name: "Numbers", msg: "ssn 78051120 amount 12.50", kwargs: `{"ssn": 78051120, "amount": 12.50}`,
		want: "ssn ••• amount 12.50"},
	{name: "LongestFirst", msg: "token abcd-efgh and abcd", kwargs: `{"token": "abcd", "secret": "abcd-efgh"}`,
		want: "token ••• and •••"},
	{name: "Overlapping", msg: "xabcd", kwargs: `{"token": "abcd", "secret": "xabc"}`, want: "x•••"},
	{name: "UnmaskedKeyQuotedStays", msg: "order ord_7 failed", kwargs: `{"order": "ord_7"}`, want: "order ord_7 failed"},
	{name: "Patterns", msg: "mail ann@example.com, card 4111 1111 1111 1111, word swordfish, sk_live_abc",
		patterns: []string{`[a-z]+@[a-z.]+`, `\d{4}( \d{4}){3}`, `\bfish\b`, `sk_live_[[:alnum:]]+`},
		want:     "mail •••, card •••, word swordfish, •••"},
	{name: "WordBoundary", msg: "id tok_1 and xtok_2", patterns: []string{`\btok_\d\b`}, want: "id ••• and xtok_2"},
	{name: "LeftmostLongest", msg: "abc", patterns: []string{`a|ab|abc`}, want: "•••"},
	{name: "CaseInsensitiveKeys", msg: "Bearer xyz-123", kwargs: `{"AUTHORIZATION": "Bearer xyz-123"}`, want: "•••"},
	// A secret holding a quote, a backslash or a control character, quoted
	// by its handler: each spelling is hidden, not only the decoded one.
	{name: "QuotedAsJSON", msg: `invalid kwargs {"password": "=HYPERLINK(\"http://evil\")"} and =HYPERLINK("http://evil")`,
		kwargs: `{"password": "=HYPERLINK(\"http://evil\")"}`, want: `invalid kwargs {"password": "•••"} and •••`},
	{name: "EscapedSpellings", kwargs: `{"token": "a<b>&c\\d\te\u0001f"}`,
		msg:  `pg "a<b>&c\\d\te\u0001f" go "a\u003cb\u003e\u0026c\\d\te\u0001f" q "a<b>&c\\d\te\x01f" raw a<b>&c\d` + "\te\x01f",
		want: `pg "•••" go "•••" q "•••" raw •••`},
	{name: "ControlAndDEL", kwargs: `{"secret": "tab\tdel\u007fbell\u0007"}`,
		msg:  `pg "tab\tdel` + "\x7f" + `bell\u0007" q "tab\tdel\x7fbell\a"`,
		want: `pg "•••" q "•••"`},
	// %q escapes what Go's unicode tables call unprintable, json.Marshal
	// only U+2028 and U+2029: the search must know the same runes.
	{name: "NonASCII", kwargs: `{"secret": "nb\u00a0sp\u2028ls\udb40\udc01é-x"}`,
		msg: "q " + strconv.Quote("nb\u00a0sp\u2028ls\U000e0001é-x") + ` go "nb` + "\u00a0" + `sp\u2028ls` + "\U000e0001" + `é-x"` +
			" pg \"nb\u00a0sp\u2028ls\U000e0001é-x\"",
		want: `q "•••" go "•••" pg "•••"`},
	// A text cut short ends in the first part of a secret: hidden too,
	// however that secret is spelled.
	{name: "CutAtTheEnd", msg: "charge 4000056655665556 then 400005" + mask.TruncatedMark,
		kwargs: `{"card_number": "4000056655665556"}`, want: "charge ••• then •••" + mask.TruncatedMark},
	{name: "CutEscapedAtTheEnd", msg: `invalid kwargs {"password": "Erin-77\"q` + mask.TruncatedMark,
		kwargs: `{"password": "Erin-77\"quoted\""}`, want: `invalid kwargs {"password": "•••` + mask.TruncatedMark},
	{name: "NotCutStays", msg: "charge 400005", kwargs: `{"card_number": "4000056655665556"}`, want: "charge 400005"},
}

func TestMaskText(t *testing.T) {
	t.Parallel()
	for _, tc := range maskCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := mask.New(mask.DefaultKeys, tc.patterns)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.MaskText(tc.msg, []byte(orEmpty(tc.args, "[]")), []byte(orEmpty(tc.kwargs, "{}"))); got != tc.want {
				t.Errorf("MaskText = %q, want %q", got, tc.want)
			}
		})
	}
}

// The search builds its text in SQL: it must hide exactly what the pages
// hide, or search would find (or miss) what a page shows.
func TestMaskTextSameInSQL(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	for _, tc := range maskCases {
		m, err := mask.New(mask.DefaultKeys, tc.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Letters.ApplyMaskPolicy(context.Background(), m); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got string
		if err := db.Get(&got, `SELECT dead_letter_masked_search_text($1, $2, $3, keys, patterns) FROM mask_policy`, tc.msg,
			orEmpty(tc.args, "[]"), orEmpty(tc.kwargs, "{}")); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.HasPrefix(got, tc.want+" ") {
			t.Errorf("%s: SQL search text %q, want it to start with %q", tc.name, got, tc.want)
		}
	}
}

func orEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// The search's printed arguments hide each sensitive pair whole, and
// nothing else, however the pairs nest or resemble each other.
func TestSearchTextMasksPairs(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	for _, tc := range []struct{ in, want string }{
		{`{"pin_token": 1, "x": {"pin_token": 12}}`, `{"x": {"pin_token": "•••"}, "pin_token": "•••"}`},
		{`{"a\": b": 1, "a\": token": 2}`, `{"a\": b": 1, "a\": token": "•••"}`},
		{`{"auth": {"token": "abcd", "n": 1}, "tok": "abcd"}`, `{"tok": "abcd", "auth": {"n": 1, "token": "•••"}}`},
		{`{"secret": {"token": "x", "k": [1, 2]}, "secret_2": {"token": "x"}}`, `{"secret": "•••", "secret_2": "•••"}`},
		{`{"note": "token \"token\": 1"}`, `{"note": "token \"token\": 1"}`},
		{`{"l": [{"ssn": "1"}, {"ssn": "12"}, {"SSN": null}]}`, `{"l": [{"ssn": "•••"}, {"ssn": "•••"}, {"SSN": "•••"}]}`},
	} {
		var got, want string
		if err := db.Get(&got, `SELECT dead_letter_masked_search_text('', '[]', $1, keys, patterns) FROM mask_policy`, tc.in); err != nil {
			t.Fatal(err)
		}
		if err := db.Get(&want, `SELECT $1::jsonb::text`, tc.want); err != nil {
			t.Fatal(err)
		}
		if got != " [] "+want {
			t.Errorf("%s: search text %q, want %q", tc.in, got, " [] "+want)
		}
	}
}

// The search's SQL spells a secret as Go's %q does only if it knows the
// runes Go's unicode tables call unprintable (00102_search.sql). When Go's
// tables change, this fails: a new migration must redefine
// dead_letter_go_unprintable with the ranges it prints.
func TestSQLKnowsGoUnprintableRunes(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var ranges []string
	from := rune(-1)
	for r := rune(0x80); r <= unicode.MaxRune+1; r++ {
		unprintable := r <= unicode.MaxRune && !strconv.IsPrint(r)
		switch {
		case unprintable && from < 0:
			from = r
		case !unprintable && from >= 0:
			ranges = append(ranges, fmt.Sprintf("[%d,%d)", from, r))
			from = -1
		}
	}
	want := "{" + strings.Join(ranges, ",") + "}"
	var got string
	if err := db.Get(&got, `SELECT dead_letter_go_unprintable()::text`); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Go (Unicode %s) escapes other runes than the search knows; redefine dead_letter_go_unprintable as\n%s",
			unicode.Version, want)
	}

	// And the search hides each spelling of a secret around runes from
	// every part of Unicode exactly as the pages do.
	m := mask.ForKeys(mask.DefaultKeys)
	var msgs, kwargs, wants []string
	for r := rune(0x01); r <= unicode.MaxRune; r += 997 {
		if r >= 0xD800 && r <= 0xDFFF {
			continue // not text in either
		}
		secret := "a<" + string(r) + `"\` + string(r+1)
		b, err := json.Marshal(map[string]string{"token": secret})
		if err != nil {
			t.Fatal(err)
		}
		quoted, _ := json.Marshal(secret)
		msg := "q " + strconv.Quote(secret) + " json " + string(quoted) + " cut " + string([]rune(strconv.Quote(secret))[:4]) + mask.TruncatedMark
		msgs, kwargs = append(msgs, msg), append(kwargs, string(b))
		wants = append(wants, m.MaskText(msg, nil, b))
	}
	var sql []string
	if err := db.Select(&sql, `SELECT dead_letter_masked_search_text(msg, '[]', kw::jsonb, p.keys, p.patterns)
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY t(msg, kw, n), mask_policy p ORDER BY n`,
		pq.Array(msgs), pq.Array(kwargs)); err != nil {
		t.Fatal(err)
	}
	for i, got := range sql {
		if !strings.HasPrefix(got, wants[i]+" ") || strings.Contains(wants[i], "a<") {
			t.Errorf("%q: search text %q, pages %q", msgs[i], got, wants[i])
		}
	}
}
