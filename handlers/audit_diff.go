package handlers

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/redrive/redrive/views"
)

// The before/after of an edit and replay, as a line diff of the
// pretty-printed JSON: a person sees at a glance which key changed.

// Limits on a diff shown in a page: past diffCells the LCS table would cost
// too much, and the diff falls back to "all removed, all added"; past
// diffLines lines the rest is cut (the entry's page has the whole details).
const (
	diffCells = 250_000
	diffLines = 200
)

// jsonDiff diffs two JSON values field by field; it returns nil when they
// are equal once formatted.
func jsonDiff(field string, before, after json.RawMessage) *views.FieldDiff {
	a, b := indentLines(before), indentLines(after)
	if strings.Join(a, "\n") == strings.Join(b, "\n") {
		return nil
	}
	lines := lineDiff(a, b)
	d := &views.FieldDiff{Field: field, Lines: lines}
	if len(lines) > diffLines {
		d.Lines, d.Cut = lines[:diffLines], true
	}
	return d
}

// indentLines pretty-prints raw JSON into lines; text that is not JSON is
// split as it is.
func indentLines(raw json.RawMessage) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return strings.Split(string(raw), "\n")
	}
	return strings.Split(buf.String(), "\n")
}

// lineDiff is the longest-common-subsequence diff of two line lists: kept
// lines as " ", removed as "-", added as "+", in order.
func lineDiff(a, b []string) []views.DiffLine {
	// Common prefix and suffix first: an edit usually touches a line or two.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	out := make([]views.DiffLine, 0, len(a)+len(b))
	for _, l := range a[:pre] {
		out = append(out, views.DiffLine{Op: " ", Text: l})
	}
	out = append(out, lcsDiff(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		out = append(out, views.DiffLine{Op: " ", Text: l})
	}
	return out
}

func lcsDiff(a, b []string) []views.DiffLine {
	var out []views.DiffLine
	if len(a)*len(b) > diffCells {
		for _, l := range a {
			out = append(out, views.DiffLine{Op: "-", Text: l})
		}
		for _, l := range b {
			out = append(out, views.DiffLine{Op: "+", Text: l})
		}
		return out
	}
	// n[i][j] is the LCS length of a[i:] and b[j:].
	n := make([][]int, len(a)+1)
	for i := range n {
		n[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				n[i][j] = n[i+1][j+1] + 1
			} else {
				n[i][j] = max(n[i+1][j], n[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			out = append(out, views.DiffLine{Op: " ", Text: a[i]})
			i, j = i+1, j+1
		case n[i+1][j] >= n[i][j+1]:
			out = append(out, views.DiffLine{Op: "-", Text: a[i]})
			i++
		default:
			out = append(out, views.DiffLine{Op: "+", Text: b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		out = append(out, views.DiffLine{Op: "-", Text: a[i]})
	}
	for ; j < len(b); j++ {
		out = append(out, views.DiffLine{Op: "+", Text: b[j]})
	}
	return out
}
