package grouping

import "strings"

// Text returns the template as one line: its tokens joined by spaces, each
// variable written as it is stored (Wildcard, CodeValue, or a word that
// holds a Wildcard).
func (t Template) Text() string { return strings.Join(t.Tokens, " ") }

// IsVariable reports whether a template token stands for a value that
// differs between the group's letters: the Wildcard, CodeValue (a short
// capital code such as a currency), or a word whose data part was masked
// ("onExtend:<*>", "<*>::syncPowerState").
func IsVariable(token string) bool {
	return token == Wildcard || token == CodeValue || strings.Contains(token, Wildcard)
}

// Variables returns the positions in t.Tokens of t's variables (see
// IsVariable), in the order Values returns their values.
func (t Template) Variables() []int {
	var at []int
	for i, tok := range t.Tokens {
		if IsVariable(tok) {
			at = append(at, i)
		}
	}
	return at
}

// Part is a piece of a template as it reads: constant text, or one of its
// variables.
type Part struct {
	// Text is the constant text; "" for a variable.
	Text string
	// Var is the variable's index in the order of Variables and Values,
	// or -1 for constant text.
	Var int
}

// Parts returns t as it reads, in pieces: its constant words joined by
// spaces, and each variable a piece of its own. A word that holds a
// Wildcard gives its constant parts around the variable ("onExtend:" and
// the variable), and a variable piece for each Wildcard in it.
func (t Template) Parts() []Part {
	var parts []Part
	text := func(s string) {
		if s == "" {
			return
		}
		if n := len(parts); n > 0 && parts[n-1].Var < 0 {
			parts[n-1].Text += s
			return
		}
		parts = append(parts, Part{Text: s, Var: -1})
	}
	v := 0
	for i, tok := range t.Tokens {
		if i > 0 {
			text(" ")
		}
		switch {
		case !IsVariable(tok):
			text(tok)
			continue
		case tok == Wildcard || tok == CodeValue:
			parts = append(parts, Part{Var: v})
		default:
			pieces := strings.Split(tok, Wildcard)
			for k, piece := range pieces {
				if k > 0 {
					parts = append(parts, Part{Var: v})
				}
				text(piece)
			}
		}
		v++
	}
	return parts
}

// Values returns the words of message that fill t's variables, one string
// per position of t.Variables(), in order, as the message wrote them (not
// masked); false when message does not fit t. A variable that took several
// words, a run of data ("10.11.21.122,10.11.10.1", a date and a time) or a
// span template's variable, gets the message's text from its first word to
// its last, what a search of the letters for it finds; a span variable that
// took no word gets "". A word that holds a Wildcard gets the part the
// Wildcard stands for ("1514" of "onExtend:1514").
//
// The message is read as grouping reads it: its first line, cut at
// maxMessageBytes.
func (t Template) Values(message string) ([]string, bool) {
	toks := tokenize(message)
	took, ok := t.took(toks)
	if !ok {
		return nil, false
	}
	var values []string
	for i, tok := range t.Tokens {
		if !IsVariable(tok) {
			continue
		}
		r := took[i]
		if r[0] == r[1] {
			values = append(values, "")
			continue
		}
		text := message[toks[r[0]].start:toks[r[1]-1].end]
		if tok != Wildcard && tok != CodeValue {
			text = inWord(tok, text)
		}
		values = append(values, text)
	}
	return values, true
}

// took returns, for each position p of t.Tokens, the tokens of toks it
// matched, toks[took[p][0]:took[p][1]]; false when toks does not fit t. A
// template of fixed length matches as the miner matches a message of its
// length: every constant equal, every Wildcard taken by one token that may
// vary; a span template as spanMatch does.
func (t Template) took(toks []token) ([][2]int, bool) {
	took := make([][2]int, len(t.Tokens))
	if t.Span {
		return took, spanFit(t.Tokens, toks, 0, 0, 0, took)
	}
	if len(toks) != len(t.Tokens) {
		return nil, false
	}
	for i, tok := range toks {
		switch tt := t.Tokens[i]; {
		case tt == tok.text:
		case tt == Wildcard && !tok.fixed:
		default:
			return nil, false
		}
		took[i] = [2]int{i, i + 1}
	}
	return took, true
}

// inWord returns the part of word that the Wildcards of pattern stand for:
// word without the constant text pattern has before its first Wildcard and
// after its last. Masking keeps a word's other parts as they were, so both
// are there; were they not, the word is returned whole.
func inWord(pattern, word string) string {
	prefix := pattern[:strings.Index(pattern, Wildcard)]
	suffix := pattern[strings.LastIndex(pattern, Wildcard)+len(Wildcard):]
	if len(prefix)+len(suffix) > len(word) || !strings.HasPrefix(word, prefix) || !strings.HasSuffix(word, suffix) {
		return word
	}
	return word[len(prefix) : len(word)-len(suffix)]
}
