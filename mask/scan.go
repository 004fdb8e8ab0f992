package mask

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/redrive/redrive/internal/jsonscan"
)

// maskScan is Mask's path for valid JSON that holds a sensitive key: one
// pass over the bytes, copying what stays and writing the placeholder for
// what is hidden. Its output is, byte for byte, what maskTokens (the
// token-by-token decoder it replaces) writes: no whitespace, keys and
// strings as json.Marshal writes them, numbers and literals as written.
// FuzzMaskScanSameAsTokens holds the two to that.
func (m Policy) maskScan(raw []byte) (json.RawMessage, bool) {
	s := maskScanner{Cursor: jsonscan.Cursor{Raw: raw}, m: m}
	s.out.Grow(len(raw))
	s.value(false)
	if !s.masked {
		return raw, false
	}
	return s.out.Bytes(), true
}

// maskScanner walks JSON already known to be valid (json.Valid), so it
// checks nothing.
type maskScanner struct {
	jsonscan.Cursor
	m      Policy
	out    bytes.Buffer
	masked bool
}

var placeholderJSON = strconv.Quote(Placeholder)

// value copies the value at s.I, or replaces it with the placeholder when
// hide is set.
func (s *maskScanner) value(hide bool) {
	s.SkipSpace()
	start := s.I
	if hide {
		s.SkipValue()
		s.out.WriteString(placeholderJSON)
		s.masked = true
		return
	}
	switch c := s.Raw[s.I]; c {
	case '{':
		s.I++
		s.out.WriteByte('{')
		for n := 0; ; n++ {
			s.SkipSpace()
			if s.Raw[s.I] == '}' {
				break
			}
			if s.Raw[s.I] == ',' {
				s.I++
				s.SkipSpace()
			}
			if n > 0 {
				s.out.WriteByte(',')
			}
			tok := s.StringToken()
			key := jsonscan.DecodeString(tok)
			s.writeString(tok, key)
			s.SkipSpace()
			s.I++ // the colon
			s.out.WriteByte(':')
			s.value(s.m.Sensitive(key))
		}
		s.I++
		s.out.WriteByte('}')
	case '[':
		s.I++
		s.out.WriteByte('[')
		for n := 0; ; n++ {
			s.SkipSpace()
			if s.Raw[s.I] == ']' {
				break
			}
			if s.Raw[s.I] == ',' {
				s.I++
			}
			if n > 0 {
				s.out.WriteByte(',')
			}
			s.value(false)
		}
		s.I++
		s.out.WriteByte(']')
	case '"':
		tok := s.StringToken()
		s.writeString(tok, "")
	default: // a number, true, false or null: as written
		s.SkipScalar()
		s.out.Write(s.Raw[start:s.I])
	}
}

// writeString writes a string token as json.Marshal writes its value:
// the token itself when Marshal would not change it (no escape, nothing
// Marshal escapes), or else decoded and marshalled. decoded is the value
// when the caller has it.
func (s *maskScanner) writeString(tok []byte, decoded string) {
	if marshalsAsIs(tok[1 : len(tok)-1]) {
		s.out.Write(tok)
		return
	}
	if decoded == "" {
		decoded = jsonscan.DecodeString(tok)
	}
	b, _ := json.Marshal(decoded)
	s.out.Write(b)
}

// marshalsAsIs reports whether json.Marshal writes the string s as it is:
// valid UTF-8 with no escape, and none of what Marshal escapes (quotes and
// backslashes, which a raw token only holds escaped; <, > and &; U+2028
// and U+2029; control characters, which valid JSON never holds raw).
func marshalsAsIs(s []byte) bool {
	for _, c := range s {
		switch {
		case c == '\\' || c == '<' || c == '>' || c == '&' || c < 0x20:
			return false
		case c == 0xE2: // the first byte of U+2028 and U+2029
			return false
		}
	}
	return utf8.Valid(s)
}
