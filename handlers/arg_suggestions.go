package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/views"
)

// Suggestions of qualifiers are drawn from the letters on the page, as the
// page shows them (masked): the keys their arguments hold and the values
// most of them share, each a link that adds the qualifier to the search.
// A key the masking policy hides is never suggested, nor a hidden value.
const (
	maxSuggestedKeys   = 8
	maxSuggestedValues = 4
	// maxSuggestionDepth: kwargs.customer.id is suggested, deeper is not.
	maxSuggestionDepth = 3
	maxSuggestedValue  = 40
)

// argSuggestions returns the keys of the page's letters' arguments, the
// most common first, with their most common values; f is the filter
// shown, whose search each suggestion's link extends.
func argSuggestions(f dlq.Filter, letters []dlq.DeadLetter, m mask.Policy) []views.ArgKeySuggestion {
	type key struct {
		letters int
		values  map[string]int
	}
	keys := map[string]*key{}
	for _, d := range letters {
		seen := map[string]bool{}
		visit := func(path argquery.Path, raw json.RawMessage) {
			p := path.String()
			k := keys[p]
			if k == nil {
				k = &key{values: map[string]int{}}
				keys[p] = k
			}
			if !seen[p] {
				seen[p] = true
				k.letters++
			}
			if v, ok := qualifierValue(raw); ok {
				k.values[v]++
			}
		}
		walkArgs(argquery.Path{Column: argquery.Kwargs}, d.Kwargs, m, visit)
		walkArgs(argquery.Path{Column: argquery.Args}, d.Args, m, visit)
	}
	paths := make([]string, 0, len(keys))
	for p := range keys {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int {
		return cmp.Or(cmp.Compare(keys[b].letters, keys[a].letters), cmp.Compare(a, b))
	})
	var out []views.ArgKeySuggestion
	for _, p := range paths[:min(len(paths), maxSuggestedKeys)] {
		k := keys[p]
		s := views.ArgKeySuggestion{Path: p, Letters: k.letters}
		values := make([]string, 0, len(k.values))
		for v, n := range k.values {
			if n > 1 || len(letters) == 1 { // a value one letter of many holds is no common value
				values = append(values, v)
			}
		}
		slices.SortFunc(values, func(a, b string) int { return cmp.Or(cmp.Compare(k.values[b], k.values[a]), cmp.Compare(a, b)) })
		for _, v := range values[:min(len(values), maxSuggestedValues)] {
			q := strings.TrimSpace(f.Q + " " + p + ":" + v)
			with := f.FirstPage()
			with.Q = q
			s.Values = append(s.Values, views.ArgValueSuggestion{Qualifier: p + ":" + v, Value: v, Letters: k.values[v],
				Href: "/dead-letters" + query(with)})
		}
		out = append(out, s)
	}
	return out
}

// walkArgs calls visit for every scalar in raw (a letter's masked args or
// kwargs) at most maxSuggestionDepth steps down, with its path; a key the
// policy hides is skipped whole.
func walkArgs(path argquery.Path, raw json.RawMessage, m mask.Policy, visit func(argquery.Path, json.RawMessage)) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '{':
		if len(path.Steps) >= maxSuggestionDepth {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return
		}
		for k, v := range obj {
			if m.Sensitive(k) {
				continue
			}
			walkArgs(stepped(path, argquery.Step{Key: k}), v, m, visit)
		}
	case '[':
		// args' positions are its arguments; a list inside them is a value
		// too varied to suggest.
		if path.Column != argquery.Args || len(path.Steps) > 0 {
			return
		}
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return
		}
		for i, v := range arr[:min(len(arr), maxSuggestedKeys)] {
			walkArgs(stepped(path, argquery.Step{Index: i, IsIndex: true}), v, m, visit)
		}
	default:
		if len(path.Steps) > 0 {
			visit(path, raw)
		}
	}
}

func stepped(p argquery.Path, s argquery.Step) argquery.Path {
	p.Steps = append(slices.Clip(p.Steps), s)
	return p
}

// qualifierValue writes a scalar as a qualifier's value: a number, true,
// false or null bare, a string bare when it reads back as the same string
// and quoted otherwise; false for a hidden value or one too long to be a
// common one.
func qualifierValue(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return string(raw), len(raw) <= maxSuggestedValue
	}
	if s == mask.Placeholder || len([]rune(s)) > maxSuggestedValue {
		return "", false
	}
	bare := s != "" && !strings.ContainsAny(s, " \t\"()") && s != "true" && s != "false" && s != "null" &&
		!strings.EqualFold(s, "and") && !strings.EqualFold(s, "or") && !strings.EqualFold(s, "not")
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		bare = false
	}
	if bare {
		return s, true
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`, true
}
