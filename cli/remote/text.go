package remote

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// What the console sends back is data, not instructions to the on-call
// engineer's terminal: an error text can quote a payload, and a payload can
// hold escape sequences that set the window's title, erase and rewrite
// lines ("all replayed OK") or, where OSC 52 is allowed, write the
// clipboard. So every text the commands print shows control characters
// visibly: C0 and DEL as \x1b, C1 and the bidirectional overrides (which
// reorder what is shown) as \u009b, bytes that are not UTF-8 as \xff.

// oneLine is s for a cell or a field: on one line (runs of white space,
// newlines included, become one space) with its controls shown.
func oneLine(s string) string {
	return visible(strings.Join(strings.Fields(s), " "), false)
}

// block is s for a text of several lines, a traceback: its newlines and
// tabs kept, every other control shown.
func block(s string) string { return visible(s, true) }

// visible replaces each control character of s by its escape; keepLines
// keeps newlines and tabs.
func visible(s string, keepLines bool) string {
	if !needsEscape(s, keepLines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isC1(r) || isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string, keepLines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			// Decoding is needed for C1, bidi controls and broken UTF-8.
			return !utf8.ValidString(s[i:]) || strings.ContainsFunc(s[i:], func(r rune) bool { return isC1(r) || isBidiControl(r) })
		}
		if c < 0x20 && !(keepLines && (c == '\n' || c == '\t')) || c == 0x7f {
			return true
		}
	}
	return false
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// isBidiControl reports the embeddings, overrides and isolates, which make
// a terminal show text in another order than it is ("Trojan Source").
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// visibleWriter shows the controls of everything written through it but
// newlines and tabs: a second line of defence under oneLine and block,
// for a field printed without them. Each Write is escaped on its own,
// which is whole for the fmt calls that use it.
type visibleWriter struct{ w io.Writer }

func (v visibleWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(v.w, visible(string(p), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}
