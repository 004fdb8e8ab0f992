package handlers

// The reference for walkArgs and qualifierValue: the decoding through
// encoding/json they replaced (slower, the same answers), which
// FuzzWalkArgsAsTheDecoder holds them to.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/mask"
)

// refWalkArgs is walkArgs as it was: each object decoded into a map, each
// array into a slice.
func refWalkArgs(path argquery.Path, raw json.RawMessage, m mask.Policy, visit func(argquery.Path, json.RawMessage)) {
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
			refWalkArgs(stepped(path, argquery.Step{Key: k}), v, m, visit)
		}
	case '[':
		if path.Column != argquery.Args || len(path.Steps) > 0 {
			return
		}
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return
		}
		for i, v := range arr[:min(len(arr), maxSuggestedKeys)] {
			refWalkArgs(stepped(path, argquery.Step{Index: i, IsIndex: true}), v, m, visit)
		}
	default:
		if len(path.Steps) > 0 {
			visit(path, raw)
		}
	}
}

// refQualifierValue is qualifierValue as it was: the value decoded with
// encoding/json (null, which decodes into a string as "", suggested bare).
func refQualifierValue(raw json.RawMessage) (string, bool) {
	var s string
	if string(raw) == "null" || json.Unmarshal(raw, &s) != nil {
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

func stepped(p argquery.Path, s argquery.Step) argquery.Path {
	p.Steps = append(slices.Clip(p.Steps), s)
	return p
}

// refWalkArgsText is refWalkArgs with walkArgs's arguments: a column, and
// the path given as text.
func refWalkArgsText(column string, raw json.RawMessage, m mask.Policy, visit func(string, json.RawMessage)) {
	refWalkArgs(argquery.Path{Column: column}, raw, m, func(p argquery.Path, v json.RawMessage) { visit(p.String(), v) })
}

// visits lists what walk visits in raw, as args and as kwargs, each visit
// as its path, the scalar and its qualifier value, sorted (a map's keys
// come in any order).
func visits(walk func(string, json.RawMessage, mask.Policy, func(string, json.RawMessage)),
	qualifier func(json.RawMessage) (string, bool), raw []byte, m mask.Policy) []string {
	var out []string
	for _, col := range []string{argquery.Args, argquery.Kwargs} {
		walk(col, raw, m, func(p string, v json.RawMessage) {
			q, ok := qualifier(v)
			out = append(out, fmt.Sprintf("%s = %s -> %q %v", p, v, q, ok))
		})
	}
	slices.Sort(out)
	return out
}

// FuzzWalkArgsAsTheDecoder: on any input, the one-pass walk visits what
// decoding visited, with the same scalars and qualifier values.
func FuzzWalkArgsAsTheDecoder(f *testing.F) {
	for _, s := range []string{
		`{"country":"DE","customer":{"id":42,"email":"a@b.c","card":{"number":"4111"}},"items":[1,2]}`,
		`[1, "two", {"three": 3, "password": "x"}, [4], null, true, 1.5e3, "a b", "and", "12"]`,
		`{"a":1,"a":2,"\u0061":3,"b":{"c":{"d":{"e":1}}}}`,
		`{"k":"` + mask.Placeholder + `","long":"` + strings.Repeat("é", 41) + `","q":"say \"hi\"","n":null}`,
		` [ 1 , 2 ,3,4,5,6,7,8,9,10 ] `,
		`["inf", "NaN", "+1", ".5", "0x1p-2", "Infinity", "1_000", "-", "e5", "i"]`,
		`{"bad": }`, `[1,2`, `"just a string"`, `42`, ``, `{"\ud800":"\xff"}`,
		`{"0":0,"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16,"1":"again","17":17}`,
	} {
		f.Add([]byte(s))
	}
	m := mask.ForKeys(mask.DefaultKeys)
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := visits(walkArgs, qualifierValue, raw, m)
		want := visits(refWalkArgsText, refQualifierValue, raw, m)
		if !slices.Equal(got, want) {
			t.Errorf("walk of %q:\n got %q\nwant %q", raw, got, want)
		}
	})
}

// TestNullIsSuggestedAsNull: a null argument is suggested as the bare
// null, which the query language reads as JSON null, not as "", which
// matches empty strings only.
func TestNullIsSuggestedAsNull(t *testing.T) {
	if got, ok := qualifierValue(json.RawMessage(`null`)); !ok || got != "null" {
		t.Errorf("qualifierValue(null) = %q, %v; want null", got, ok)
	}
	if got, ok := qualifierValue(json.RawMessage(`""`)); !ok || got != `""` {
		t.Errorf(`qualifierValue("") = %q, %v; want ""`, got, ok)
	}
	if c := (argquery.Value{Text: "null"}).Candidates(); !slices.Contains(c, "null") {
		t.Errorf("a bare null matches %q, not JSON null", c)
	}
}
