package dlq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/dlq/dlqtest"
)

// maskCases are error texts with the arguments of their letter: the pages
// (Go) and the search (SQL, migrations 00010 and 00029) must hide the same
// in each.
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
	{name: "CutAtTheEnd", msg: "charge 4000056655665556 then 400005" + dlq.TruncatedMark,
		kwargs: `{"card_number": "4000056655665556"}`, want: "charge ••• then •••" + dlq.TruncatedMark},
	{name: "CutEscapedAtTheEnd", msg: `invalid kwargs {"password": "Erin-77\"q` + dlq.TruncatedMark,
		kwargs: `{"password": "Erin-77\"quoted\""}`, want: `invalid kwargs {"password": "•••` + dlq.TruncatedMark},
	{name: "NotCutStays", msg: "charge 400005", kwargs: `{"card_number": "4000056655665556"}`, want: "charge 400005"},
}

func TestMaskText(t *testing.T) {
	t.Parallel()
	for _, tc := range maskCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := dlq.NewMaskPolicy(dlq.DefaultMaskKeys, tc.patterns)
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
	db := dlqtest.NewDB(t)
	store := dlq.NewStore(db.DB)
	for _, tc := range maskCases {
		m, err := dlq.NewMaskPolicy(dlq.DefaultMaskKeys, tc.patterns)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.ApplyMaskPolicy(context.Background(), m); err != nil {
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

func TestNewMaskPolicyRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ keys, patterns []string }{
		"InvalidRegexp":   {patterns: []string{`(`}},
		"MatchesEmpty":    {patterns: []string{`\d*`}},
		"QuoteInKey":      {keys: []string{`pass"word`}},
		"BackslashInKey":  {keys: []string{`pass\word`}},
		"ControlCharKey":  {keys: []string{"pass\tword"}},
		"BackreferenceGo": {patterns: []string{`(a)\1`}},
	} {
		if _, err := dlq.NewMaskPolicy(orDefault(tc.keys), tc.patterns); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if m, err := dlq.NewMaskPolicy(dlq.DefaultMaskKeys, dlq.ParseMaskPatterns("\\d{4,}\n\n  tok_[a-z]+  \n")); err != nil ||
		strings.Join(m.TextPatterns(), "|") != `\d{4,}|tok_[a-z]+` {
		t.Errorf("one pattern a line: %v, %v", m.TextPatterns(), err)
	}
}

// FuzzMaskText: masking never panics and never makes a text longer than
// it was, placeholders aside.
func FuzzMaskText(f *testing.F) {
	f.Add("invalid kwargs hunter2-pw", `{"password": "hunter2-pw"}`)
	f.Add("x", `{"token": ["abcd", {"a": 12345}]}`)
	f.Add("", `[`)
	f.Fuzz(func(t *testing.T, msg, kwargs string) {
		m := dlq.NewMasker(dlq.DefaultMaskKeys)
		got := m.MaskText(msg, []byte("[]"), []byte(kwargs))
		if got == dlq.MaskPlaceholder || got == msg {
			return
		}
		if len(regexp.MustCompile(`•••`).ReplaceAllString(got, "")) > len(msg) {
			t.Errorf("MaskText(%q) = %q grew", msg, got)
		}
	})
}

func orEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orDefault(keys []string) []string {
	if keys == nil {
		return dlq.DefaultMaskKeys
	}
	return keys
}

// The search's printed arguments hide each sensitive pair whole, and
// nothing else, however the pairs nest or resemble each other.
func TestSearchTextMasksPairs(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)
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

// A handler that quotes its payload as JSON writes a secret holding a
// quote, a backslash or a control character escaped, and a Go handler's
// json.Marshal or %q escapes more (<, >, &, non-printables): each spelling
// of the secret is hidden, not only the decoded one. (The search hides
// the same spellings: maskCases, TestMaskTextSameInSQL.)
func TestMaskTextHidesEscapedSecrets(t *testing.T) {
	t.Parallel()
	m := dlq.NewMasker(dlq.DefaultMaskKeys)
	kwargs := []byte(`{"password": "=HYPERLINK(\"http://evil\")", "token": "a<b>&c\\d\te\u0001f"}`)
	for _, msg := range []string{
		`invalid kwargs {"password": "=HYPERLINK(\"http://evil\")"}`, // jsonb's own printing
		`token "a<b>&c\\d\te\u0001f" refused`,                        // PostgreSQL's to_json
		`token "a\u003cb\u003e\u0026c\\d\te\u0001f" refused`,         // Go's json.Marshal
		`token "a<b>&c\\d\te\x01f" refused`,                          // Go's %q
	} {
		got := m.MaskText(msg, []byte("[]"), kwargs)
		for _, part := range []string{"HYPERLINK", `a<b`, `a\u003cb`, `c\\d`} {
			if strings.Contains(got, part) {
				t.Errorf("MaskText(%s) = %s: shows %q of a masked value", msg, got, part)
			}
		}
		if !strings.Contains(got, dlq.MaskPlaceholder) {
			t.Errorf("MaskText(%s) = %s: hides nothing", msg, got)
		}
	}
}

// A text cut short (by the worker's bounds, or the detail's caps) can end
// in the first part of a secret: that part is hidden too, since the whole
// secret is no longer there to be found.
func TestMaskTextHidesSecretCutAtTheEnd(t *testing.T) {
	t.Parallel()
	m := dlq.NewMasker(dlq.DefaultMaskKeys)
	kwargs := []byte(`{"card_number": "4000056655665556", "note": "4000 is fine"}`)
	for _, tc := range []struct{ in, want string }{
		{"charge 400005" + dlq.TruncatedMark, "charge •••" + dlq.TruncatedMark},
		{"card 4000056655665556 then 40000566556" + dlq.TruncatedMark, "card ••• then •••" + dlq.TruncatedMark},
		// Not cut: a number that merely starts like the secret stays.
		{"charge 400005", "charge 400005"},
	} {
		if got := m.MaskText(tc.in, []byte("[]"), kwargs); got != tc.want {
			t.Errorf("MaskText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The search's SQL spells a secret as Go's %q does only if it knows the
// runes Go's unicode tables call unprintable (migration 00029). When Go's
// tables change, this fails: a new migration must redefine
// dead_letter_go_unprintable with the ranges it prints.
func TestSQLKnowsGoUnprintableRunes(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)
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
	m := dlq.NewMasker(dlq.DefaultMaskKeys)
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
		msg := "q " + strconv.Quote(secret) + " json " + string(quoted) + " cut " + string([]rune(strconv.Quote(secret))[:4]) + dlq.TruncatedMark
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
