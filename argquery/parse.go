package argquery

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

type tokKind int

const (
	tokEnd tokKind = iota
	tokWord
	tokLParen
	tokRParen
)

// token is a word (quoted parts included: kwargs.name:"Jane Doe" is one)
// or a parenthesis; pos counts runes from 1.
type token struct {
	kind tokKind
	text string
	pos  int
}

// lex splits s into words and parentheses. A double quote opens a
// quoted part, in which spaces and parentheses are text and \" and \\
// are escapes; the part ends at the next unescaped quote.
func lex(s string) ([]token, error) {
	rs := []rune(s)
	var toks []token
	for i := 0; i < len(rs); {
		r := rs[i]
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(':
			toks = append(toks, token{kind: tokLParen, text: "(", pos: i + 1})
			i++
		case r == ')':
			toks = append(toks, token{kind: tokRParen, text: ")", pos: i + 1})
			i++
		default:
			start := i
			for i < len(rs) && !unicode.IsSpace(rs[i]) && rs[i] != '(' && rs[i] != ')' {
				if rs[i] != '"' {
					i++
					continue
				}
				end, ok := quoteEnd(rs, i)
				if !ok {
					return nil, &Error{Pos: i + 1, Msg: "this quote is never closed: end it with another \""}
				}
				i = end + 1
			}
			toks = append(toks, token{kind: tokWord, text: string(rs[start:i]), pos: start + 1})
		}
	}
	return append(toks, token{kind: tokEnd, pos: len(rs) + 1}), nil
}

// quoteEnd returns the index of the quote that closes the one at open.
func quoteEnd(rs []rune, open int) (int, bool) {
	for j := open + 1; j < len(rs); j++ {
		switch rs[j] {
		case '\\':
			j++
		case '"':
			return j, true
		}
	}
	return 0, false
}

// unquote reads a quoted part whole ("..." with \" and \\ escapes).
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		if c == '\\' {
			if i+1 >= len(s)-1 {
				return "", false
			}
			i++
			c = s[i]
			if c != '"' && c != '\\' {
				b.WriteByte('\\')
			}
		} else if c == '"' {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

type parser struct {
	toks  []token
	i     int
	terms int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

// keyword reports whether t is the unquoted word kw, in any case.
func keyword(t token, kw string) bool {
	return t.kind == tokWord && strings.EqualFold(t.text, kw)
}

// or := and ("or" and)*
func (p *parser) or(depth int) (Node, error) {
	first, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	terms := []Node{first}
	for keyword(p.peek(), "or") {
		p.next()
		n, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, n)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return Or{Terms: terms}, nil
}

// and := unary (["and"] unary)*: terms side by side must all hold.
func (p *parser) and(depth int) (Node, error) {
	first, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	terms := []Node{first}
	for {
		t := p.peek()
		if t.kind == tokEnd || t.kind == tokRParen || keyword(t, "or") {
			break
		}
		if keyword(t, "and") {
			p.next()
		}
		n, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		terms = append(terms, n)
	}
	if len(terms) == 1 {
		return first, nil
	}
	return And{Terms: terms}, nil
}

// unary := "not" unary | "(" or ")" | term
func (p *parser) unary(depth int) (Node, error) {
	if depth >= maxDepth {
		return nil, &Error{Pos: p.peek().pos, Msg: fmt.Sprintf("nested more than %d deep", maxDepth)}
	}
	t := p.next()
	switch {
	case t.kind == tokEnd:
		return nil, &Error{Pos: t.pos, Msg: "the search ends where a term is missing"}
	case t.kind == tokRParen:
		return nil, &Error{Pos: t.pos, Msg: "a ) where a term is missing"}
	case keyword(t, "and") || keyword(t, "or"):
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%q needs a term on each side", strings.ToLower(t.text))}
	case keyword(t, "not"):
		n, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return Not{Term: n}, nil
	case t.kind == tokLParen:
		n, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, &Error{Pos: t.pos, Msg: "this ( is never closed"}
		}
		return n, nil
	}
	p.terms++
	if isQualifier(t.text) {
		return parseQualifier(t)
	}
	return parseText(t)
}

// parseText reads a free-text term: a word, or a quoted phrase.
func parseText(t token) (Node, error) {
	phrase := t.text
	if strings.HasPrefix(phrase, `"`) {
		s, ok := unquote(phrase)
		if !ok {
			return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%s: quote a phrase whole, as \"reset by peer\"", phrase)}
		}
		phrase = s
	}
	if len([]rune(phrase)) < MinTextLen {
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("%q: search text needs at least %d characters", phrase, MinTextLen)}
	}
	return Text{Phrase: phrase}, nil
}

// parseQualifier reads column, steps, comparison and value from one word.
func parseQualifier(t token) (Node, error) {
	s := t.text
	fail := func(format string, a ...any) error {
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("%s: ", clip(s)) + fmt.Sprintf(format, a...)}
	}
	var path Path
	rest := s
	for _, col := range []string{Kwargs, Args} {
		if r, ok := strings.CutPrefix(s, col); ok {
			path.Column, rest = col, r
			break
		}
	}
	for strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, ".") {
		if len(path.Steps) == maxPathSteps {
			return nil, fail("a path of at most %d keys and positions", maxPathSteps)
		}
		var step Step
		var ok bool
		if rest[0] == '[' {
			step, rest, ok = indexStep(rest)
			if !ok {
				return nil, fail("a position is a whole number in brackets, as args[0]")
			}
		} else if step, rest, ok = keyStep(rest[1:]); !ok {
			return nil, fail("name a key after the dot, as kwargs.customer_id, or quote it, as kwargs.\"odd key\"")
		}
		path.Steps = append(path.Steps, step)
	}
	if path.Column == Args && !path.Steps[0].IsIndex {
		return nil, fail("args are positional: name one by its position, as args.0 or args[0]")
	}
	op, value, ok := cutOp(rest)
	if !ok {
		return nil, fail("compare with a value, as kwargs.country:DE, args.0:42 or kwargs.amount>100")
	}
	v := Value{Text: value}
	if strings.HasPrefix(value, `"`) {
		if v.Text, ok = unquote(value); !ok {
			return nil, fail("quote a value whole, as kwargs.name:\"Jane Doe\"")
		}
		v.Quoted = true
	} else if value == "" {
		return nil, fail("the value is missing: add one after %s, or quote an empty one (\"\")", op)
	} else if strings.Contains(value, `"`) {
		return nil, fail("quote a value whole, as kwargs.name:\"Jane Doe\"")
	}
	if op != Eq && op != Ne {
		if _, isNum := v.Number(); !isNum && !v.Quoted {
			return nil, fail("%s compares numbers (kwargs.amount>100) or quoted text (kwargs.day>=\"2026-01-01\")", op)
		}
	}
	return Compare{Path: path, Op: op, Value: v}, nil
}

// indexStep reads "[n]" at the start of s.
func indexStep(s string) (Step, string, bool) {
	end := strings.IndexByte(s, ']')
	if end < 2 {
		return Step{}, "", false
	}
	n, err := strconv.Atoi(s[1:end])
	if err != nil || n < 0 || n > 100_000 || s[1] == '+' {
		return Step{}, "", false
	}
	return Step{Index: n, IsIndex: true}, s[end+1:], true
}

// keyStep reads a key after a dot: a quoted key, or letters, digits, _
// and -. A key of digits alone is a position when it follows args
// directly or any array; the store decides, since only the letter says
// what it holds, so here "0" is taken as a position of args and a key
// elsewhere, where PostgreSQL's #> reads it either way.
func keyStep(s string) (Step, string, bool) {
	if strings.HasPrefix(s, `"`) {
		end, ok := quoteEnd([]rune(s), 0)
		if !ok {
			return Step{}, "", false
		}
		rs := []rune(s)
		key, ok := unquote(string(rs[:end+1]))
		return Step{Key: key}, string(rs[end+1:]), ok
	}
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '.' || c == '[' || c == ':' || c == '=' || c == '!' || c == '<' || c == '>' || c == '"' {
			break
		}
		i++
	}
	if i == 0 {
		return Step{}, "", false
	}
	key := s[:i]
	if n, err := strconv.Atoi(key); err == nil && n >= 0 && key[0] != '+' && key[0] != '-' {
		return Step{Key: key, Index: n, IsIndex: true}, s[i:], true
	}
	return Step{Key: key}, s[i:], true
}

// cutOp reads the comparison at the start of s and returns the value
// after it.
func cutOp(s string) (Op, string, bool) {
	for _, o := range []struct {
		text string
		op   Op
	}{{"!=", Ne}, {">=", Ge}, {"<=", Le}, {":", Eq}, {"=", Eq}, {">", Gt}, {"<", Lt}} {
		if v, ok := strings.CutPrefix(s, o.text); ok {
			return o.op, v, true
		}
	}
	return "", "", false
}

// clip keeps a quoted term short in an error message.
func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}
