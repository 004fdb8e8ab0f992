package letters

import (
	"encoding/json"
	"strings"

	"github.com/lib/pq"
	"github.com/redrive/redrive/argquery"
)

// argQueryWhere renders a search query with qualifiers on the arguments
// (package argquery) as one condition on the letters' view. Every key,
// position and value travels as an argument (arg returns its
// placeholder); only the structure is SQL.
//
// A key the masking policy hides matches nothing, however the query was
// made (the console refuses it first, with a message): the condition is
// gated on dead_letter_keys_masked of every key named, evaluated once
// per statement (00114_argument_queries.sql).
func argQueryWhere(n argquery.Node, arg func(any) string) string {
	var keys []string
	for _, c := range argquery.Qualifiers(n) {
		keys = append(keys, c.Path.Keys()...)
	}
	cond := nodeSQL(n, arg)
	if len(keys) == 0 {
		return cond
	}
	return `NOT (SELECT dead_letter_keys_masked(` + arg(pq.Array(keys)) + `::text[])) AND (` + cond + `)`
}

func nodeSQL(n argquery.Node, arg func(any) string) string {
	switch n := n.(type) {
	case argquery.And:
		return joinSQL(n.Terms, " AND ", arg)
	case argquery.Or:
		return joinSQL(n.Terms, " OR ", arg)
	case argquery.Not:
		return "NOT (" + nodeSQL(n.Term, arg) + ")"
	case argquery.Text:
		return searchTextSQL(n.Phrase, arg)
	case argquery.Compare:
		return compareSQL(n, arg)
	}
	return "FALSE" // argquery makes no other node
}

func joinSQL(terms []argquery.Node, sep string, arg func(any) string) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = "(" + nodeSQL(t, arg) + ")"
	}
	return strings.Join(parts, sep)
}

// searchTextSQL is a substring of the letter's masked search text, as the
// plain search reads it (00102_search.sql): only rows built under the
// current mask policy count, and % and _ are meant literally.
func searchTextSQL(phrase string, arg func(any) string) string {
	return `id IN (SELECT dead_letter_id FROM dead_letter_search WHERE search_text ILIKE ` +
		arg("%"+escapeLike(phrase)+"%") + ` ESCAPE '\' AND policy_version = (SELECT version FROM mask_policy))`
}

// compareSQL is one qualifier: never NULL, so that "not" of a qualifier
// holds for a letter that lacks the key.
//
// An equality whose path is keys only (after args' position) is also
// asked as containment (@>), which the GIN index on the column answers;
// the exact comparison at the path then keeps only the letters whose
// value is at that very place (containment ignores positions in arrays).
// A comparison the index cannot answer (a range, a position inside
// kwargs) is checked on each letter the rest of the filter reads, in
// failed_at order, until the page is full.
func compareSQL(c argquery.Compare, arg func(any) string) string {
	col := c.Path.Column // args or kwargs: one of two constants, never typed text
	at := col + " #> " + arg(pq.Array(c.Path.Texts())) + "::text[]"
	switch c.Op {
	case argquery.Eq, argquery.Ne:
		cands := c.Value.Candidates()
		vals := make([]string, len(cands))
		for i, v := range cands {
			vals[i] = arg(v) + "::jsonb"
		}
		eq := "coalesce(" + at + " IN (" + strings.Join(vals, ", ") + "), false)"
		if docs := containment(c.Path, cands); docs != nil {
			within := make([]string, len(docs))
			for i, d := range docs {
				within[i] = col + " @> " + arg(d) + "::jsonb"
			}
			eq = "(" + strings.Join(within, " OR ") + ") AND " + eq
		}
		if c.Op == argquery.Ne {
			return "NOT (" + eq + ")"
		}
		return eq
	}
	op := string(c.Op)
	if num, ok := c.Value.Number(); ok {
		return "coalesce(CASE WHEN jsonb_typeof(" + at + ") = 'number' THEN (" + at + ")::numeric " + op + " " + arg(num) + "::numeric END, false)"
	}
	return "coalesce(CASE WHEN jsonb_typeof(" + at + ") = 'string' THEN (" + col + " #>> " + arg(pq.Array(c.Path.Texts())) + "::text[]) COLLATE \"C\" " +
		op + " " + arg(c.Value.Text) + " END, false)"
}

// containment returns, for each candidate value, the JSON document that
// every letter with that value at p contains: {"customer": {"id": 7}}
// for kwargs.customer.id:7, [{"sku": "A"}] for args[0].sku:A. None when
// p steps into an array below the top (a position there cannot be
// written as containment).
func containment(p argquery.Path, cands []string) []string {
	steps := p.Steps
	if p.Column == argquery.Args {
		steps = steps[1:] // args' position: the array around the document
	}
	for _, s := range steps {
		if s.IsIndex {
			return nil
		}
	}
	docs := make([]string, len(cands))
	for i, v := range cands {
		doc := json.RawMessage(v)
		for j := len(steps) - 1; j >= 0; j-- {
			b, _ := json.Marshal(map[string]json.RawMessage{steps[j].Key: doc})
			doc = b
		}
		if p.Column == argquery.Args {
			doc = append(append(json.RawMessage{'['}, doc...), ']')
		}
		docs[i] = string(doc)
	}
	return docs
}
