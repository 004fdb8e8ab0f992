package groups

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/postgres"
)

// groupTopValues is how many of a variable's most common values
// GroupVariables returns.
const groupTopValues = 5

// groupVariableLettersSQL reads the messages of a group's newest $2
// letters, with their arguments, which say what masking hides in each
// message: one walk of dead_letters_fingerprint_idx (fingerprint,
// failed_at DESC, id DESC) that stops after $2 entries, however big the
// group. The group is written as a range and its id is in the ORDER BY so
// that only that index gives the order: with "fingerprint = $1" the
// planner may walk the time index instead, filtering on the group, which
// costs little for a group of the newest letters but reads every newer
// letter for a big group that stopped failing weeks ago.
const groupVariableLettersSQL = `
SELECT error_message, args, kwargs FROM dead_letter_records
WHERE fingerprint >= $1 AND fingerprint <= $1
ORDER BY fingerprint, failed_at DESC, id DESC LIMIT $2`

type variableLetter struct {
	Message string          `db:"error_message"`
	Args    json.RawMessage `db:"args"`
	Kwargs  json.RawMessage `db:"kwargs"`
}

// GroupVariables returns the template of group id and, for each of its
// variables, how many distinct values its newest GroupVariablesSample
// letters gave it and the most common ones, masked with p as the letter
// page masks messages. A group without a kept template comes back with
// no Tokens and no Variables.
func (s *Store) GroupVariables(ctx context.Context, id string, p mask.Policy) (dlq.GroupVariables, error) {
	tpl, err := s.GroupTemplate(ctx, id)
	if errors.Is(err, dlq.ErrNotFound) {
		return dlq.GroupVariables{}, nil
	}
	if err != nil {
		return dlq.GroupVariables{}, fmt.Errorf("group variables: %w", err)
	}
	var letters []variableLetter
	if err := s.db.SelectContext(ctx, &letters, groupVariableLettersSQL, id, dlq.GroupVariablesSample); err != nil {
		return dlq.GroupVariables{}, fmt.Errorf("group variables: read letters of %s: %w", id, postgres.Translate(err))
	}
	return countVariables(tpl, letters, p), nil
}

// countVariables counts the values letters give tpl's variables.
func countVariables(tpl grouping.Template, letters []variableLetter, p mask.Policy) dlq.GroupVariables {
	at := tpl.Variables()
	out := dlq.GroupVariables{Tokens: tpl.Tokens, Span: tpl.Span, Read: len(letters)}
	for _, p := range tpl.Parts() {
		out.Parts = append(out.Parts, dlq.TemplatePart{Text: p.Text, Var: p.Var})
	}
	// Per variable: letters per real value, and letters per value as
	// shown; the two differ where masking hid something.
	byValue := make([]map[string]int, len(at))
	shown := make([]map[string]int, len(at))
	for i := range at {
		byValue[i], shown[i] = map[string]int{}, map[string]int{}
	}
	for _, l := range letters {
		values, ok := tpl.Values(l.Message)
		if !ok {
			continue
		}
		out.Fit++
		masked := maskedValues(tpl, l, values, p)
		for i := range at {
			byValue[i][values[i]]++
			shown[i][masked[i]]++
		}
	}
	for i, pos := range at {
		out.Variables = append(out.Variables, dlq.GroupVariable{
			At: pos, Distinct: len(byValue[i]), Top: topValues(shown[i], groupTopValues), Prefix: sharedPrefix(shown[i]),
		})
	}
	return out
}

// maskedValues returns values, the values of l's message, as the letter
// page shows them: read again from the message masked with p. When
// masking changed the message so that it no longer fits the template (it
// hid a part of a constant word), every value is hidden: which of them
// held the secret cannot be told.
func maskedValues(tpl grouping.Template, l variableLetter, values []string, p mask.Policy) []string {
	masked := p.MaskText(l.Message, l.Args, l.Kwargs)
	if masked == l.Message {
		return values
	}
	shown, ok := tpl.Values(masked)
	if !ok || len(shown) != len(values) {
		shown = make([]string, len(values))
		for i := range shown {
			shown[i] = mask.Placeholder
		}
	}
	return shown
}

// topValues returns the n values with the most letters, most first, ties
// in the values' order.
func topValues(counts map[string]int, n int) []dlq.ValueCount {
	top := make([]dlq.ValueCount, 0, len(counts))
	for v, c := range counts {
		top = append(top, dlq.ValueCount{Value: v, N: c, Hidden: strings.Contains(v, mask.Placeholder)})
	}
	slices.SortFunc(top, func(a, b dlq.ValueCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), strings.Compare(a.Value, b.Value))
	})
	return top[:min(n, len(top))]
}

// minPrefix is the shortest shared start worth showing.
const minPrefix = 2

// sharedPrefix returns the start all values share, whole characters, when
// there are at least two values, none of them hidden, and it is at least
// minPrefix long; "" otherwise.
func sharedPrefix(counts map[string]int) string {
	if len(counts) < 2 {
		return ""
	}
	prefix, first := "", true
	for v := range counts {
		if strings.Contains(v, mask.Placeholder) {
			return ""
		}
		if first {
			prefix, first = v, false
			continue
		}
		n := 0
		for n < len(prefix) && n < len(v) && prefix[n] == v[n] {
			n++
		}
		prefix = prefix[:n]
	}
	for len(prefix) > 0 && !utf8.ValidString(prefix) {
		prefix = prefix[:len(prefix)-1]
	}
	if utf8.RuneCountInString(prefix) < minPrefix {
		return ""
	}
	return prefix
}

// groupMinutelySQL counts a group's letters per minute in [$2, $3): a range
// of dead_letters_fingerprint_idx (fingerprint, failed_at DESC, id DESC),
// read from the index alone where the visibility map allows. It reads each
// letter of the window: for a group of 100,000 letters in the last three
// hours (ten a second) that takes 60 to 150 ms on a shared two-core
// machine, most of it in the letters' heap pages; a summary per minute,
// kept by the insert trigger, is the way on if outages grow larger.
const groupMinutelySQL = `
SELECT date_trunc('minute', failed_at, 'UTC') AS bucket, count(*) AS n FROM dead_letter_records
WHERE fingerprint = $1 AND failed_at >= $2 AND failed_at < $3 GROUP BY 1`

// GroupMinutely returns a group's letters per minute over the GroupMinutes
// minutes ending with now's minute, oldest first, gaps filled with 0.
func (s *Store) GroupMinutely(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error) {
	end := now.UTC().Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-dlq.GroupMinutes * time.Minute)
	var got []dlq.InflowBucket
	if err := s.db.SelectContext(ctx, &got, groupMinutelySQL, fingerprint, start, end); err != nil {
		return nil, fmt.Errorf("group inflow per minute: %w", postgres.Translate(err))
	}
	return dlq.Bucketize(got, start, end, time.Minute), nil
}
