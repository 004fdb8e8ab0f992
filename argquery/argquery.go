// Package argquery is the query language of the dead-letter search box:
// qualifiers on a letter's arguments (kwargs.country:DE, args.0:42,
// args[1].amount>100), free text, and, or, not and parentheses. It turns
// the text into a tree and nothing more: the store renders the tree as
// SQL with every value bound as a parameter, and the console checks its
// keys against the masking policy.
//
// A search with no qualifier is no query of this language: it stays the
// plain substring search it always was (Parse returns nil), so that
// "connection not found" still finds that phrase.
package argquery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits that keep a query a person types, and its SQL, small.
const (
	// MaxTerms bounds the qualifiers and text terms of one query: each
	// is a condition of every read of the list.
	MaxTerms = 16
	// maxDepth bounds nested parentheses and nots, so a hostile query
	// cannot recurse deeply.
	maxDepth = 8
	// MinTextLen is the shortest free-text term, as for the plain search:
	// the trigram index needs three characters.
	MinTextLen = 3
	// maxPathSteps bounds a path's keys and positions.
	maxPathSteps = 8
)

// Columns a qualifier can address: a letter's positional arguments (a
// JSON array) and its keyword arguments (a JSON object).
const (
	Args   = "args"
	Kwargs = "kwargs"
)

// Node is one part of a query: And, Or, Not, Text or Compare.
type Node interface{ node() }

// And holds when every one of its terms does.
type And struct{ Terms []Node }

// Or holds when any one of its terms does.
type Or struct{ Terms []Node }

// Not holds when its term does not.
type Not struct{ Term Node }

// Text is a free-text term: a substring of the letter's searchable text
// (its error message and masked arguments), as the plain search finds.
type Text struct{ Phrase string }

// Compare is a qualifier: the value at Path compared with Value.
type Compare struct {
	Path  Path
	Op    Op
	Value Value
}

func (And) node()     {}
func (Or) node()      {}
func (Not) node()     {}
func (Text) node()    {}
func (Compare) node() {}

// Op is a qualifier's comparison.
type Op string

// The comparisons: ":" and "=" are both equality.
const (
	Eq Op = "="
	Ne Op = "!="
	Gt Op = ">"
	Ge Op = ">="
	Lt Op = "<"
	Le Op = "<="
)

// Path addresses a value inside args or kwargs.
type Path struct {
	// Column is Args or Kwargs.
	Column string
	Steps  []Step
}

// Step is one key of an object or one position of an array.
type Step struct {
	Key     string
	Index   int
	IsIndex bool
}

// Texts returns the path's steps as PostgreSQL's #> operator reads them:
// a key, or a position in decimal.
func (p Path) Texts() []string {
	out := make([]string, len(p.Steps))
	for i, s := range p.Steps {
		if s.Key != "" {
			out[i] = s.Key
		} else {
			out[i] = strconv.Itoa(s.Index)
		}
	}
	return out
}

// Keys returns what the path names that may be an object's key (a
// position in brackets never is): the masking policy may hide those.
func (p Path) Keys() []string {
	var keys []string
	for _, s := range p.Steps {
		if s.Key != "" {
			keys = append(keys, s.Key)
		}
	}
	return keys
}

// String writes the path as a person types it: kwargs.customer.id,
// args[0], kwargs."odd key".
func (p Path) String() string {
	var b strings.Builder
	b.WriteString(p.Column)
	for _, s := range p.Steps {
		b.WriteString(s.String())
	}
	return b.String()
}

// String writes one step as Path.String writes it after the steps before
// it: [0], .id, ."odd key".
func (s Step) String() string {
	switch {
	case s.IsIndex && s.Key == "":
		return "[" + strconv.Itoa(s.Index) + "]"
	case s.IsIndex, plainKey(s.Key):
		return "." + s.Key
	default:
		return "." + strconv.Quote(s.Key)
	}
}

// plainKey reports whether key can be typed without quotes.
func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for _, r := range key {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// Value is the value a qualifier compares with, as typed.
type Value struct {
	Text string
	// Quoted values are strings; a bare one may also be a number, a
	// boolean or null.
	Quoted bool
}

// Candidates returns the JSON values an equality with v matches: a
// quoted value is a string; a bare 42, true or null is that JSON value or
// the string of the same letters, since a producer may have sent either.
func (v Value) Candidates() []string {
	str, _ := json.Marshal(v.Text)
	if v.Quoted {
		return []string{string(str)}
	}
	if _, ok := v.Number(); ok || v.Text == "true" || v.Text == "false" || v.Text == "null" {
		return []string{v.Text, string(str)}
	}
	return []string{string(str)}
}

// Number returns v as a JSON number, when it is a bare one.
func (v Value) Number() (string, bool) {
	if v.Quoted || !jsonNumber(v.Text) {
		return "", false
	}
	return v.Text, true
}

// jsonNumber reports whether s is a number in JSON's own syntax, which
// PostgreSQL's numeric reads too (and 1e999 does not overflow it).
func jsonNumber(s string) bool {
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil && len(s) <= 40
}

// Error is a query that cannot be read: what is wrong, in words for the
// person who typed it, and where.
type Error struct {
	// Pos is the offset in runes of the term at fault, from 1.
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("at character %d: %s", e.Pos, e.Msg) }

// HasQualifier reports whether s holds a qualifier, so that it is a query
// of this language rather than a plain substring search.
func HasQualifier(s string) bool {
	toks, err := lex(s)
	if err != nil {
		// An unclosed quote after args. still means a qualifier.
		return strings.Contains(s, Args+".") || strings.Contains(s, Args+"[") || strings.Contains(s, Kwargs+".") || strings.Contains(s, Kwargs+"[")
	}
	for _, t := range toks {
		if t.kind == tokWord && isQualifier(t.text) {
			return true
		}
	}
	return false
}

// isQualifier: a word that starts by naming args or kwargs and a step.
func isQualifier(word string) bool {
	for _, col := range []string{Args, Kwargs} {
		if rest, ok := strings.CutPrefix(word, col); ok && (strings.HasPrefix(rest, ".") || strings.HasPrefix(rest, "[")) {
			return true
		}
	}
	return false
}

// Parse reads a search box's text. It returns nil, nil when s holds no
// qualifier (a plain substring search), the query's tree otherwise, or an
// *Error saying what to fix.
func Parse(s string) (Node, error) {
	if !utf8.ValidString(s) {
		return nil, &Error{Pos: 1, Msg: "the search is not valid UTF-8"}
	}
	if !HasQualifier(s) {
		return nil, nil
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEnd {
		if t.kind == tokRParen {
			return nil, &Error{Pos: t.pos, Msg: "a ) closes no ("}
		}
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("unexpected %q", t.text)}
	}
	if p.terms > MaxTerms {
		return nil, &Error{Pos: 1, Msg: fmt.Sprintf("at most %d terms in one search; this one has %d", MaxTerms, p.terms)}
	}
	return n, nil
}

// Qualifiers returns every qualifier of n, in the order they were typed.
func Qualifiers(n Node) []Compare {
	var out []Compare
	var walk func(Node)
	walk = func(n Node) {
		switch n := n.(type) {
		case And:
			for _, t := range n.Terms {
				walk(t)
			}
		case Or:
			for _, t := range n.Terms {
				walk(t)
			}
		case Not:
			walk(n.Term)
		case Compare:
			out = append(out, n)
		}
	}
	walk(n)
	return out
}

// HasText reports whether n holds a free-text term.
func HasText(n Node) bool {
	switch n := n.(type) {
	case And:
		for _, t := range n.Terms {
			if HasText(t) {
				return true
			}
		}
	case Or:
		for _, t := range n.Terms {
			if HasText(t) {
				return true
			}
		}
	case Not:
		return HasText(n.Term)
	case Text:
		return true
	}
	return false
}
