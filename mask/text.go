package mask

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error messages and tracebacks are written by handlers, and a handler that
// quotes its payload ("invalid kwargs {\"password\": ...}", "card ending
// 7552") puts in the text what the arguments' masking hides. So wherever
// error text is shown, searched or exported it is masked too, by rules the
// search's SQL (00102_search.sql) applies the same way:
//
//  1. every string or number under a sensitive key of the letter's own
//     arguments, at least MinValueLen characters long, is replaced
//     by Placeholder wherever it appears, in each of its spellings
//     (spellings), longest first;
//  2. in a text cut short, the longest start of one that it ends in;
//  3. then every match of each extra pattern (REDRIVE_MASK_PATTERNS).
//
// Shorter values are left: masking every "12" or "EUR" a letter holds
// would blank half of every message and protect nothing.

// MinValueLen is the shortest masked value that is hidden in error
// text.
const MinValueLen = 4

// TruncatedMark ends a text that was cut short: by the worker, which
// bounds what an attempt stores, or by the letter's detail, which caps its
// tracebacks. What precedes it may be the first part of a secret, which
// masking then hides too (TextMask.Apply).
const TruncatedMark = "… (truncated)"

// textPattern is one extra pattern, compiled for Go and translated for
// PostgreSQL.
type textPattern struct {
	written string
	re      *regexp.Regexp
	sql     string
}

// New returns a Policy for the given key patterns that also hides
// matches of textPatterns in error messages and tracebacks. textPatterns are
// regular expressions in Go's syntax; since the search applies them in
// PostgreSQL, a pattern is refused when the two would read it differently
// in a way that is known (see sqlPattern), and letters.Store.ApplyMaskPolicy
// refuses one PostgreSQL rejects. Key patterns holding quotes, backslashes
// or control characters are refused: the search's quick test for
// sensitive keys looks for patterns in printed JSON, which escapes those.
func New(keys, textPatterns []string) (Policy, error) {
	m := ForKeys(keys)
	for _, k := range m.patterns {
		if strings.ContainsAny(k, `"\`) || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 }) {
			return Policy{}, fmt.Errorf("mask key pattern %q: quotes, backslashes and control characters are not allowed", k)
		}
	}
	for _, p := range textPatterns {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return Policy{}, fmt.Errorf("mask pattern %q: %w", p, err)
		}
		if re.MatchString("") {
			return Policy{}, fmt.Errorf("mask pattern %q matches empty text, so it would hide nothing and mark every character", p)
		}
		// Leftmost-longest, as PostgreSQL's regular expressions match: the
		// page and the search then hide the same text.
		re.Longest()
		sql, err := sqlPattern(p)
		if err != nil {
			return Policy{}, fmt.Errorf("mask pattern %q: %w", p, err)
		}
		m.text = append(m.text, textPattern{written: p, re: re, sql: sql})
	}
	return m, nil
}

// ParsePatterns reads REDRIVE_MASK_PATTERNS: one regular expression per
// line (a comma can belong to a pattern, as in \d{4,}); blank lines are
// ignored. Several patterns can also be one, joined with |.
func ParsePatterns(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// TextPatterns returns the extra patterns as written.
func (m Policy) TextPatterns() []string {
	out := make([]string, len(m.text))
	for i, p := range m.text {
		out[i] = p.written
	}
	return out
}

// SQLTextPatterns returns the extra patterns in PostgreSQL's syntax, in
// the order of TextPatterns: what the store gives the search's SQL.
func (m Policy) SQLTextPatterns() []string {
	out := make([]string, len(m.text))
	for i, p := range m.text {
		out[i] = p.sql
	}
	return out
}

// sqlPattern translates a Go (RE2) pattern to PostgreSQL's: the one escape
// both accept with another meaning is \b (Go: a word boundary; PostgreSQL:
// a backspace), and \B (Go: not a boundary; PostgreSQL: a backslash). They
// become \y and \Y outside bracket expressions; inside one Go refuses them.
// Every other difference is a pattern one side rejects, which
// New (Go) and ApplyMaskPolicy (PostgreSQL) refuse at start.
func sqlPattern(p string) (string, error) {
	var out strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			i = writeEscape(&out, p, i, inClass)
			continue
		case !inClass && c == '[':
			inClass = true
			i = openClass(&out, p, i)
			continue
		case inClass && c == '[' && i+1 < len(p) && p[i+1] == ':':
			last, err := copyClassName(&out, p, i)
			if err != nil {
				return "", err
			}
			i = last
			continue
		case inClass && c == ']':
			inClass = false
		}
		out.WriteByte(c)
	}
	return out.String(), nil
}

// writeEscape writes the escape starting at p[i] (a backslash with a byte
// after it) in PostgreSQL's spelling and returns the index of its last
// byte: \b and \B outside a class are the only escapes that change.
func writeEscape(out *strings.Builder, p string, i int, inClass bool) int {
	next := p[i+1]
	if !inClass && (next == 'b' || next == 'B') {
		out.WriteString(map[byte]string{'b': `\y`, 'B': `\Y`}[next])
		return i + 1
	}
	out.WriteByte(p[i])
	out.WriteByte(next)
	return i + 1
}

// openClass writes the [ at p[i] that opens a bracket expression and
// returns the index of the last byte it took: a ] first in the class
// (after an optional ^) is literal, so it is copied here rather than
// read as the class's end.
func openClass(out *strings.Builder, p string, i int) int {
	out.WriteByte('[')
	if i+1 < len(p) && p[i+1] == '^' {
		i++
		out.WriteByte('^')
	}
	if i+1 < len(p) && p[i+1] == ']' {
		i++
		out.WriteByte(']')
	}
	return i
}

// copyClassName copies a class name such as [:alpha:] starting at p[i]
// whole and returns the index of its last byte, so that its ] does not
// end the bracket expression around it.
func copyClassName(out *strings.Builder, p string, i int) (int, error) {
	end := strings.Index(p[i+2:], ":]")
	if end < 0 {
		return 0, fmt.Errorf("unterminated character class name")
	}
	out.WriteString(p[i : i+2+end+2])
	return i + 2 + end + 1, nil
}

// TextMask hides one letter's secrets in its texts; build it once with
// Policy.TextMask and apply it to the message, the traceback and each
// attempt's.
type TextMask struct {
	// secrets longest first; hideAll when the arguments could not be read.
	secrets  []string
	patterns []textPattern
	hideAll  bool
}

// TextMask returns the mask of a letter's (or a job's) error text: the
// values its arguments hide, and the extra patterns.
func (m Policy) TextMask(args, kwargs json.RawMessage) TextMask {
	return m.textMask(m.needsMask(args), m.needsMask(kwargs))
}

// needsMask returns raw when masking may change it or take a secret from
// it, and nil when it is empty or plain.
func (m Policy) needsMask(raw json.RawMessage) json.RawMessage {
	if len(m.patterns) == 0 || len(bytes.TrimSpace(raw)) == 0 || m.plain(raw) {
		return nil
	}
	return raw
}

// textMask is TextMask of arguments already through needsMask.
func (m Policy) textMask(args, kwargs json.RawMessage) TextMask {
	t := TextMask{patterns: m.text}
	if len(m.patterns) == 0 || (args == nil && kwargs == nil) {
		return t
	}
	seen := map[string]bool{}
	for _, raw := range []json.RawMessage{args, kwargs} {
		if raw == nil {
			continue
		}
		var v any
		if err := decodeNumbers(raw, &v); err != nil {
			// Arguments that cannot be read cannot say what to hide:
			// hide everything rather than guess.
			return TextMask{hideAll: true}
		}
		m.collectSecrets(v, false, seen)
	}
	for s := range seen {
		for _, v := range spellings(s) {
			if !slices.Contains(t.secrets, v) {
				t.secrets = append(t.secrets, v)
			}
		}
	}
	// Longest first, then byte order: the order the search's SQL uses, so
	// where two values overlap both hide the same characters.
	slices.SortFunc(t.secrets, func(a, b string) int {
		if n := utf8.RuneCountInString(b) - utf8.RuneCountInString(a); n != 0 {
			return n
		}
		return strings.Compare(a, b)
	})
	return t
}

// spellings returns a secret and the ways error text may write it
// escaped: a handler that quotes its payload prints JSON, as PostgreSQL
// does (a letter's arguments are jsonb), or as Go's json.Marshal does
// (which also escapes <, > and &, and with SetEscapeHTML(false) does not),
// or quotes a value with Go's %q. A secret with a quote, a backslash or a
// control character in it would otherwise be hidden only where it is
// written as it is. The quotes around a spelling are not part of it.
// The search's SQL spells secrets the same way (dead_letter_mask_spellings,
// 00102_search.sql): a spelling added here needs a migration there.
func spellings(secret string) []string {
	out := []string{secret}
	if !strings.ContainsFunc(secret, func(r rune) bool { return r < 0x20 || r > 0x7e || strings.ContainsRune(`"\<>&`, r) }) {
		return out // printable ASCII that no encoder escapes: most secrets
	}
	add := func(quoted string) {
		if v := quoted[1 : len(quoted)-1]; !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	add(pgJSONString(secret))
	if b, err := json.Marshal(secret); err == nil {
		add(string(b))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(secret) == nil {
		add(strings.TrimSuffix(b.String(), "\n"))
	}
	add(strconv.Quote(secret))
	return out
}

// pgJSONString is s as PostgreSQL prints a JSON string (escape_json):
// quotes, backslashes and control characters escaped, nothing else.
func pgJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (m Policy) collectSecrets(v any, hidden bool, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			m.collectSecrets(val, hidden || m.Sensitive(k), into)
		}
	case []any:
		for _, val := range x {
			m.collectSecrets(val, hidden, into)
		}
	case string:
		if hidden && utf8.RuneCountInString(x) >= MinValueLen {
			into[x] = true
		}
	case json.Number:
		if hidden && len(x) >= MinValueLen {
			into[string(x)] = true
		}
	}
}

// Apply returns s with the letter's secrets and the extra patterns hidden.
func (t TextMask) Apply(s string) string {
	if s == "" {
		return s
	}
	if t.hideAll {
		return Placeholder
	}
	for _, secret := range t.secrets {
		s = strings.ReplaceAll(s, secret, Placeholder)
	}
	if body, cut := strings.CutSuffix(s, TruncatedMark); cut {
		s = t.hideCutEnd(body) + TruncatedMark
	}
	for _, p := range t.patterns {
		s = p.re.ReplaceAllLiteralString(s, Placeholder)
	}
	return s
}

// hideCutEnd hides the first part of a secret that s, a text cut short,
// ends in: the rest of the secret, by which Apply would have found it, was
// cut off. The longest such part is hidden; a text that merely ends like
// the start of a secret loses a few characters it had lost the rest of
// anyway. (The extra patterns cannot be matched in part, so a pattern's
// match cut in two may show its first part.)
func (t TextMask) hideCutEnd(s string) string {
	longest := 0
	for _, secret := range t.secrets {
		for n := len(secret) - 1; n > longest; n-- {
			if utf8.RuneStart(secret[n]) && strings.HasSuffix(s, secret[:n]) {
				longest = n
				break
			}
		}
	}
	if longest == 0 {
		return s
	}
	return s[:len(s)-longest] + Placeholder
}

// MaskText returns s, an error message or traceback of the letter or job
// whose arguments are args and kwargs, with what masking hides there
// hidden: the one rule for every place error text is shown.
func (m Policy) MaskText(s string, args, kwargs json.RawMessage) string {
	return m.TextMask(args, kwargs).Apply(s)
}

// MaskArgs masks a letter's (or a job's) arguments for display and
// returns them with the mask of its error text: what dlq.MaskLetter and MaskJob
// need, with each argument looked at once. One with no sensitive key (most
// are) is neither decoded for secrets nor copied, and comes back as it was.
func (m Policy) MaskArgs(args, kwargs json.RawMessage) (maskedArgs, maskedKwargs json.RawMessage, text TextMask) {
	a, k := m.needsMask(args), m.needsMask(kwargs)
	text = m.textMask(a, k)
	maskedArgs, maskedKwargs = args, kwargs
	if a != nil {
		maskedArgs, _ = m.maskSlow(a)
	}
	if k != nil {
		maskedKwargs, _ = m.maskSlow(k)
	}
	return maskedArgs, maskedKwargs, text
}

// MaskSample masks a group's sample message as its letter's is, with that
// letter's arguments. Without them (the letter was not found) nobody can
// say what the message quotes, so it is hidden whole when anything is
// masked at all.
func (m Policy) MaskSample(msg string, args, kwargs json.RawMessage) string {
	if noJSON(args) && noJSON(kwargs) && msg != "" && (len(m.Patterns()) > 0 || len(m.TextPatterns()) > 0) {
		return Placeholder
	}
	return m.MaskText(msg, args, kwargs)
}

// noJSON: no arguments were found (nil, or the JSON null the store's
// group sample query stands in with).
func noJSON(v json.RawMessage) bool {
	return v == nil || string(v) == "null"
}
