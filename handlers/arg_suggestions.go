package handlers

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/internal/jsonscan"
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
		visit := func(p string, raw json.RawMessage) {
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
		walkArgs(argquery.Kwargs, d.Kwargs, m, visit)
		walkArgs(argquery.Args, d.Args, m, visit)
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
// kwargs, as column says) at most maxSuggestionDepth steps down, with its
// path as argquery.Path.String writes it; a key the policy hides is
// skipped whole, and so is raw when it is not JSON. It
// reads raw in one pass over its bytes, as masking does: decoding each
// object into a map with encoding/json was a third of the list's CPU.
// refWalkArgs, that decoding, is the reference FuzzWalkArgsAsTheDecoder
// holds it to.
func walkArgs(column string, raw json.RawMessage, m mask.Policy, visit func(string, json.RawMessage)) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !json.Valid(raw) {
		return
	}
	w := argWalker{Cursor: jsonscan.Cursor{Raw: raw}, column: column, m: m, visit: visit}
	w.value(0, column)
}

// argWalker walks JSON already known to be valid, so it checks nothing.
type argWalker struct {
	jsonscan.Cursor
	column string
	m      mask.Policy
	visit  func(string, json.RawMessage)
}

// value walks the value at w.I, depth steps down at path, and moves past
// it.
func (w *argWalker) value(depth int, path string) {
	w.SkipSpace()
	switch w.Raw[w.I] {
	case '{':
		if depth >= maxSuggestionDepth {
			w.SkipValue()
			return
		}
		w.object(depth, path)
	case '[':
		// args' positions are its arguments; a list inside them is a value
		// too varied to suggest.
		if w.column != argquery.Args || depth > 0 {
			w.SkipValue()
			return
		}
		w.I++
		for n := 0; ; n++ {
			w.SkipSpace()
			if w.Raw[w.I] == ']' {
				w.I++
				return
			}
			if w.Raw[w.I] == ',' {
				w.I++
			}
			if n < maxSuggestedKeys {
				w.value(1, path+argquery.Step{Index: n, IsIndex: true}.String())
			} else {
				w.SkipSpace()
				w.SkipValue()
			}
		}
	default:
		start := w.I
		w.SkipValue()
		if depth > 0 {
			w.visit(path, w.Raw[start:w.I])
		}
	}
}

// member is one key of an object and where its value starts.
type member struct {
	key   string
	start int
}

// object walks the object at w.I. A key written twice counts once, with
// its last value, as decoding into a map keeps it; keys are compared
// decoded, so "a" and "\u0061" are one key.
func (w *argWalker) object(depth int, path string) {
	var buf [16]member
	members := buf[:0]
	var index map[string]int // past len(buf) keys, where each is in members
	w.I++
	for {
		w.SkipSpace()
		if w.Raw[w.I] == '}' {
			w.I++
			break
		}
		if w.Raw[w.I] == ',' {
			w.I++
			w.SkipSpace()
		}
		key := jsonscan.DecodeString(w.StringToken())
		w.SkipSpace()
		w.I++ // the colon
		w.SkipSpace()
		at := w.I
		w.SkipValue()
		if i, ok := w.find(members, index, key); ok {
			members[i].start = at
			continue
		}
		members = append(members, member{key, at})
		if index != nil || len(members) > len(buf) {
			if index == nil {
				index = make(map[string]int, 2*len(members))
				for i, mb := range members {
					index[mb.key] = i
				}
			}
			index[key] = len(members) - 1
		}
	}
	end := w.I
	for _, mb := range members {
		if w.m.Sensitive(mb.key) {
			continue
		}
		w.I = mb.start
		w.value(depth+1, path+argquery.Step{Key: mb.key}.String())
	}
	w.I = end
}

// find returns where key is in members: through index once there is one,
// else by looking at each.
func (w *argWalker) find(members []member, index map[string]int, key string) (int, bool) {
	if index != nil {
		i, ok := index[key]
		return i, ok
	}
	for i, mb := range members {
		if mb.key == key {
			return i, true
		}
	}
	return 0, false
}

// qualifierValue writes a scalar as a qualifier's value: a number, true,
// false or null bare, a string bare when it reads back as the same string
// and quoted otherwise; false for a hidden value or one too long to be a
// common one.
func qualifierValue(raw json.RawMessage) (string, bool) {
	var s string
	switch {
	case len(raw) > 0 && raw[0] == '"':
		s = jsonscan.DecodeString(raw)
	default:
		return string(raw), len(raw) <= maxSuggestedValue
	}
	if s == mask.Placeholder || utf8.RuneCountInString(s) > maxSuggestedValue {
		return "", false
	}
	bare := s != "" && !strings.ContainsAny(s, " \t\"()") && s != "true" && s != "false" && s != "null" &&
		!strings.EqualFold(s, "and") && !strings.EqualFold(s, "or") && !strings.EqualFold(s, "not")
	if mayBeNumber(s) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			bare = false
		}
	}
	if bare {
		return s, true
	}
	return `"` + quotedValue.Replace(s) + `"`, true
}

// mayBeNumber reports whether strconv.ParseFloat could read s: a float
// starts with a sign, a digit, a point, or the i of inf or the n of nan.
// Asking ParseFloat only then spares the error it allocates for the
// words most values are.
func mayBeNumber(s string) bool {
	if s == "" {
		return false
	}
	switch c := s[0]; {
	case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == 'i', c == 'I', c == 'n', c == 'N':
		return true
	}
	return false
}

// quotedValue escapes a string value for its quotes in a qualifier.
var quotedValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
