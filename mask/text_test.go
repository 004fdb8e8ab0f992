package mask_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/redrive/redrive/mask"
)

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ keys, patterns []string }{
		"InvalidRegexp":   {patterns: []string{`(`}},
		"MatchesEmpty":    {patterns: []string{`\d*`}},
		"QuoteInKey":      {keys: []string{`pass"word`}},
		"BackslashInKey":  {keys: []string{`pass\word`}},
		"ControlCharKey":  {keys: []string{"pass\tword"}},
		"BackreferenceGo": {patterns: []string{`(a)\1`}},
	} {
		if _, err := mask.New(orDefault(tc.keys), tc.patterns); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if m, err := mask.New(mask.DefaultKeys, mask.ParsePatterns("\\d{4,}\n\n  tok_[a-z]+  \n")); err != nil ||
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
		m := mask.ForKeys(mask.DefaultKeys)
		got := m.MaskText(msg, []byte("[]"), []byte(kwargs))
		if got == mask.Placeholder || got == msg {
			return
		}
		if len(regexp.MustCompile(`•••`).ReplaceAllString(got, "")) > len(msg) {
			t.Errorf("MaskText(%q) = %q grew", msg, got)
		}
	})
}

func orDefault(keys []string) []string {
	if keys == nil {
		return mask.DefaultKeys
	}
	return keys
}

// A handler that quotes its payload as JSON writes a secret holding a
// quote, a backslash or a control character escaped, and a Go handler's
// json.Marshal or %q escapes more (<, >, &, non-printables): each spelling
// of the secret is hidden, not only the decoded one. (The search hides
// the same spellings: maskCases, TestMaskTextSameInSQL.)
func TestMaskTextHidesEscapedSecrets(t *testing.T) {
	t.Parallel()
	m := mask.ForKeys(mask.DefaultKeys)
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
		if !strings.Contains(got, mask.Placeholder) {
			t.Errorf("MaskText(%s) = %s: hides nothing", msg, got)
		}
	}
}

// A text cut short (by the worker's bounds, or the detail's caps) can end
// in the first part of a secret: that part is hidden too, since the whole
// secret is no longer there to be found.
func TestMaskTextHidesSecretCutAtTheEnd(t *testing.T) {
	t.Parallel()
	m := mask.ForKeys(mask.DefaultKeys)
	kwargs := []byte(`{"card_number": "4000056655665556", "note": "4000 is fine"}`)
	for _, tc := range []struct{ in, want string }{
		{"charge 400005" + mask.TruncatedMark, "charge •••" + mask.TruncatedMark},
		{"card 4000056655665556 then 40000566556" + mask.TruncatedMark, "card ••• then •••" + mask.TruncatedMark},
		// Not cut: a number that merely starts like the secret stays.
		{"charge 400005", "charge 400005"},
	} {
		if got := m.MaskText(tc.in, []byte("[]"), kwargs); got != tc.want {
			t.Errorf("MaskText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
