package letters

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// DefaultArgProbeCap is how many letters a probe takes before it gives up
// and leaves the read to walk the letters. Reading k candidates by
// primary key costs about what walking 50 / selectivity letters does
// until a page of 50 is full, so the two meet near √(50 × letters):
// about 7,000 at a million letters. A little below it, since a count or
// a bulk batch checks every candidate where a page stops at 51, and the
// ids travel in every statement (40 KB at 5,000).
const DefaultArgProbeCap = 5000

// valuePrefix is how many characters of a string dead_letter_arg_values
// keeps (00102_search.sql).
const valuePrefix = 64

// ArgProbe narrows a read whose search has ranges on the arguments
// (kwargs.amount>999) to the letters the index of argument values
// (dead_letter_arg_values, 00102_search.sql) finds, when it finds few.
//
// The planner cannot make that choice itself: a range on a path is a
// condition whose selectivity it cannot estimate (one histogram of
// numbers mixes every path), so it either joined the index's thousands of
// rows where a walk of the letters newest first finds a page in a
// millisecond, or walked a million letters where the index holds 200. So
// the probe asks the index first, for at most Cap letters, and a read then
// takes them as a constant array beside its exact conditions
// (dlq.Filter.Candidates), which the planner estimates exactly. Every
// reader of a filter probes (the page, the counts, a bulk preview, its
// batches, exports), so each reads what the walk would.
type ArgProbe struct {
	// Cap is how many letters a probe may find: DefaultArgProbeCap when
	// 0; a negative Cap never probes, so every read walks.
	Cap int
}

func (p ArgProbe) limit() int {
	if p.Cap == 0 {
		return DefaultArgProbeCap
	}
	return p.Cap
}

// Selection is Filter for a selection's filter (a selection of ids is
// left as it is).
func (p ArgProbe) Selection(ctx context.Context, q sqlx.QueryerContext, s dlq.Selection) (dlq.Selection, error) {
	if s.Filter == nil {
		return s, nil
	}
	f, err := p.Filter(ctx, q, *s.Filter)
	if err != nil {
		return s, err
	}
	s.Filter = &f
	return s, nil
}

// Filter returns f narrowed to its candidates (f.Candidates) when its
// query holds a range the index can answer and the index, with the
// letters not yet indexed, holds at most Cap letters that may match;
// otherwise f without candidates, which reads as before.
//
// Of a query's terms, a range or an equality on a number or a string can
// be probed; an and of terms is probed by those of its terms that can be
// (their candidates intersected); an or only when all of its terms can
// be. A not, a != or free text cannot: a letter without the key matches
// them, and no index lists those.
//
// The probe is one statement, so one snapshot: a letter committed before
// it is either indexed, and found if it may match, or still queued, and
// then at or above QueuedFrom. A letter committed after the probe and
// before the read is left out unless it is, as if the read had come a
// moment earlier.
func (p ArgProbe) Filter(ctx context.Context, q sqlx.QueryerContext, f dlq.Filter) (dlq.Filter, error) {
	f.Candidates = nil
	if p.Cap < 0 {
		return f, nil
	}
	n, err := f.Query()
	if err != nil || n == nil || !hasRange(n) {
		return f, nil
	}
	var terms []probeTerm
	plan := planProbe(n, &terms)
	if plan == nil {
		return f, nil
	}
	found, err := p.run(ctx, q, terms)
	if err != nil {
		return f, fmt.Errorf("probe argument values: %w", err)
	}
	if found.queued > p.limit() {
		return f, nil
	}
	ids, ok := plan.eval(found, p.limit()-found.queued)
	if !ok {
		return f, nil
	}
	f.Candidates = &dlq.ArgCandidates{IDs: ids, QueuedFrom: found.queuedFrom}
	return f, nil
}

// hasRange reports whether n compares a value with <, <=, > or >=: the
// only qualifiers no other index serves.
func hasRange(n argquery.Node) bool {
	for _, c := range argquery.Qualifiers(n) {
		switch c.Op {
		case argquery.Gt, argquery.Ge, argquery.Lt, argquery.Le:
			return true
		}
	}
	return false
}

// probeTerm is one lookup of the index: the values at path that compare
// with value as cond says ($1 the path, $2 the value).
type probeTerm struct {
	path, cond, value string
}

// probePlan is how a query's candidates follow from its terms' lookups:
// a term's own (term ≥ 0), or its parts' intersected (and) or united.
type probePlan struct {
	term  int
	and   bool
	parts []*probePlan
}

// planProbe returns the plan of n's candidates, appending its lookups to
// terms, or nil when n cannot be probed (a letter may match it whatever
// the index holds).
func planProbe(n argquery.Node, terms *[]probeTerm) *probePlan {
	switch n := n.(type) {
	case argquery.Compare:
		return planCompare(n, terms)
	case argquery.And:
		plan := &probePlan{term: -1, and: true}
		for _, t := range n.Terms {
			if part := planProbe(t, terms); part != nil {
				plan.parts = append(plan.parts, part)
			}
		}
		if len(plan.parts) == 0 {
			return nil
		}
		return plan
	case argquery.Or:
		plan := &probePlan{term: -1}
		for _, t := range n.Terms {
			part := planProbe(t, terms)
			if part == nil {
				return nil
			}
			plan.parts = append(plan.parts, part)
		}
		return plan
	}
	return nil // not, free text
}

// planCompare is the plan of one qualifier: the lookups of the values it
// may match, as compareSQL compares them. A number is compared as a
// number; a quoted value (or a bare word) as text, by its first
// valuePrefix characters, which keep the order of the whole (of two
// strings in byte order, their prefixes of equal length are in the same
// order or equal). A bare number in an equality may be either.
func planCompare(c argquery.Compare, terms *[]probeTerm) *probePlan {
	path := valuePath(c.Path)
	add := func(cond, value string) *probePlan {
		*terms = append(*terms, probeTerm{path: path, cond: cond, value: value})
		return &probePlan{term: len(*terms) - 1}
	}
	text := `str %s left($2, ` + fmt.Sprint(valuePrefix) + `) COLLATE "C"`
	switch c.Op {
	case argquery.Eq:
		if c.Value.Quoted {
			return add(fmt.Sprintf(text, "="), c.Value.Text)
		}
		if c.Value.Text == "true" || c.Value.Text == "false" || c.Value.Text == "null" {
			return nil // kept by no index
		}
		str := add(fmt.Sprintf(text, "="), c.Value.Text)
		num, ok := c.Value.Number()
		if !ok {
			return str
		}
		return &probePlan{term: -1, parts: []*probePlan{str, add("num = $2::numeric", num)}}
	case argquery.Gt, argquery.Ge, argquery.Lt, argquery.Le:
		if num, ok := c.Value.Number(); ok {
			return add("num "+string(c.Op)+" $2::numeric", num)
		}
		if c.Op == argquery.Gt || c.Op == argquery.Ge {
			return add(fmt.Sprintf(text, ">="), c.Value.Text)
		}
		return add(fmt.Sprintf(text, "<="), c.Value.Text)
	}
	return nil // !=
}

// valuePath writes p as dead_letter_arg_values' path: the column, then
// each step as #> reads it, after a dot, its dots and backslashes escaped.
func valuePath(p argquery.Path) string {
	var b strings.Builder
	b.WriteString(p.Column)
	for _, s := range p.Texts() {
		b.WriteByte('.')
		b.WriteString(pathEscaper.Replace(s))
	}
	return b.String()
}

var pathEscaper = strings.NewReplacer(`\`, `\\`, `.`, `\.`)

// probeFound is what one probe read: each term's letters (at most the
// cap and one more), the letters every probe takes (too many values to
// keep), and the letters still queued for indexing.
type probeFound struct {
	terms      [][]int64
	always     []int64
	queued     int
	queuedFrom int64
}

// run looks every term up in one statement, each at most limit+1 letters.
func (p ArgProbe) run(ctx context.Context, q sqlx.QueryerContext, terms []probeTerm) (probeFound, error) {
	lim := p.limit() + 1
	args := []any{lim}
	cols := []string{
		`(SELECT coalesce(sum(n), 0) FROM (SELECT n FROM dead_letter_search_queue LIMIT $1) q)`,
		`(SELECT coalesce(min(first_id), 0) FROM dead_letter_search_queue)`,
		`array(SELECT dead_letter_id FROM dead_letter_arg_values WHERE path = '' AND str = '' LIMIT $1)`,
	}
	for _, t := range terms {
		args = append(args, t.path, t.value)
		cond := strings.NewReplacer("$2", fmt.Sprintf("$%d", len(args))).Replace(t.cond)
		cols = append(cols, fmt.Sprintf(`array(SELECT dead_letter_id FROM dead_letter_arg_values WHERE path = $%d AND %s LIMIT $1)`,
			len(args)-1, cond))
	}
	var found probeFound
	var always pq.Int64Array
	arrays := make([]pq.Int64Array, len(terms))
	dest := []any{&found.queued, &found.queuedFrom, &always}
	for i := range arrays {
		dest = append(dest, &arrays[i])
	}
	if err := q.QueryRowxContext(ctx, `SELECT `+strings.Join(cols, ", "), args...).Scan(dest...); err != nil {
		return probeFound{}, postgres.Translate(err)
	}
	found.always = always
	for _, a := range arrays {
		found.terms = append(found.terms, a)
	}
	return found, nil
}

// eval returns the plan's candidates, sorted, or false when they are
// more than limit (or a term's lookup was cut short).
func (pl *probePlan) eval(found probeFound, limit int) ([]int64, bool) {
	if pl.term >= 0 {
		ids := found.terms[pl.term]
		if len(ids)+len(found.always) > limit {
			return nil, false
		}
		return sortedSet(append(slices.Clone(ids), found.always...)), true
	}
	var out []int64
	probed := false
	for _, part := range pl.parts {
		ids, ok := part.eval(found, limit)
		switch {
		case !ok && pl.and:
			continue // another term narrows
		case !ok:
			return nil, false
		case !probed:
			out, probed = ids, true
		case pl.and:
			out = intersect(out, ids)
		default:
			out = sortedSet(append(out, ids...))
		}
	}
	if !probed || len(out) > limit {
		return nil, false
	}
	if out == nil {
		out = []int64{}
	}
	return out, true
}

func sortedSet(ids []int64) []int64 {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// intersect returns the ids in both sorted sets a and b.
func intersect(a, b []int64) []int64 {
	out := []int64{}
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	return out
}
