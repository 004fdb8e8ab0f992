package grouping

import "strings"

// A group's key holds its task, so one outage that several tasks run into
// (a provider answering 503 to both the charge and the refund) makes one
// group per task. The functions here tell whether two groups, learned
// apart, are the same failure, for a reader that shows such groups
// together as one incident. They compare what each group learned; they
// learn nothing and change no group.

// SameFailure reports whether the groups of a and b are one failure,
// whatever their tasks and places: the same error class, and templates
// that could each stand for the other's messages. Two templates of one
// length must agree at every position, or hold a Wildcard on one side
// where the other holds a word that may vary (never a fixed word: the
// missing key of a KeyError, a status code); a span template is aligned on
// its constant words as the miner aligns messages of different lengths.
// And they must share at least half of each one's constant words, so that
// a template made mostly of variables is not the same failure as any
// message of its length. A word that is the group's own task name counts
// as a variable: a message that names its task ("payments.charge for job
// 7: ...") names a different one in every task by definition.
func SameFailure(a, b Template) bool {
	if a.Class != b.Class || len(a.Tokens) == 0 || len(b.Tokens) == 0 {
		return false
	}
	a, b = withoutTask(a), withoutTask(b)
	if a.Span || b.Span {
		_, _, ok := mergeable(a.Tokens, fixedOf(a), b.Tokens, fixedOf(b))
		return ok
	}
	shared, ok := sharedWords(a, b)
	return ok && shared > 0 && halfOfEach(shared, a.Tokens, b.Tokens)
}

// sharedWords reports whether two templates of one length could each
// stand for the other's messages, position by position, and how many
// constant words they share: at every position they agree, or one holds
// a Wildcard where the other holds a word that may vary.
func sharedWords(a, b Template) (shared int, ok bool) {
	if len(a.Tokens) != len(b.Tokens) {
		return 0, false
	}
	af, bf := fixedOf(a), fixedOf(b)
	for i, at := range a.Tokens {
		bt := b.Tokens[i]
		switch {
		case at == bt && at != Wildcard:
			shared++
		case at == bt:
		case at == Wildcard && !bf[i], bt == Wildcard && !af[i]:
		default:
			return 0, false
		}
	}
	return shared, true
}

// Covering returns the template that stands for the messages of both a and
// b, Wildcard where they differ, for showing what an incident's groups
// share. It is meant for two templates that are SameFailure; for any
// others it returns a's tokens.
func Covering(a, b Template) []string {
	if !SameFailure(a, b) {
		return append([]string(nil), a.Tokens...)
	}
	a, b = withoutTask(a), withoutTask(b)
	if a.Span || b.Span {
		tokens, _, _ := mergeable(a.Tokens, fixedOf(a), b.Tokens, fixedOf(b))
		return tokens
	}
	out := make([]string, len(a.Tokens))
	for i, t := range a.Tokens {
		if t != b.Tokens[i] {
			t = Wildcard
		}
		out[i] = t
	}
	return out
}

// MessageTemplate is the template a message of task and class would start
// a group with, before anything was learned from other letters: its words, with
// data (ids, numbers, paths, dates) masked as Wildcard. It stands in for a
// group whose template is not kept (a group older than the grouper, or
// written by a bulk load), so that its sample message can be compared
// with SameFailure.
func MessageTemplate(task, class, message string) Template {
	toks := tokenize(message)
	t := Template{Task: task, Class: class, Tokens: make([]string, len(toks)), Fixed: make([]bool, len(toks))}
	for i, tok := range toks {
		t.Tokens[i], t.Fixed[i] = tok.text, tok.fixed
	}
	return t
}

// Text is a template as one line of words, Wildcard where its letters
// differ.
func Text(tokens []string) string { return strings.Join(tokens, " ") }

// withoutTask returns t with each word that is its own task's name made a
// variable.
func withoutTask(t Template) Template {
	if t.Task == "" {
		return t
	}
	var tokens []string
	var fixed []bool
	for i, tok := range t.Tokens {
		if tok != t.Task {
			continue
		}
		if tokens == nil {
			tokens, fixed = append([]string(nil), t.Tokens...), append([]bool(nil), fixedOf(t)...)
		}
		tokens[i], fixed[i] = Wildcard, false
	}
	if tokens != nil {
		t.Tokens, t.Fixed = tokens, fixed
	}
	return t
}

// fixedOf returns t's fixed marks, one per token: a template read from
// elsewhere may lack them, and then no position is fixed.
func fixedOf(t Template) []bool {
	if len(t.Fixed) == len(t.Tokens) {
		return t.Fixed
	}
	return make([]bool, len(t.Tokens))
}
