package mask

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// maskScan is Mask's path for valid JSON that holds a sensitive key: one
// pass over the bytes, copying what stays and writing the placeholder for
// what is hidden. Its output is, byte for byte, what maskTokens (the
// token-by-token decoder it replaces) writes: no whitespace, keys and
// strings as json.Marshal writes them, numbers and literals as written.
// FuzzMaskScanSameAsTokens holds the two to that.
func (m Policy) maskScan(raw []byte) (json.RawMessage, bool) {
	s := maskScanner{m: m, raw: raw}
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
	m      Policy
	raw    []byte
	i      int
	out    bytes.Buffer
	masked bool
}

var placeholderJSON = strconv.Quote(Placeholder)

func (s *maskScanner) skipSpace() {
	for s.i < len(s.raw) {
		switch s.raw[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value copies the value at s.i, or replaces it with the placeholder when
// hide is set.
func (s *maskScanner) value(hide bool) {
	s.skipSpace()
	start := s.i
	if hide {
		s.skipValue()
		s.out.WriteString(placeholderJSON)
		s.masked = true
		return
	}
	switch c := s.raw[s.i]; c {
	case '{':
		s.i++
		s.out.WriteByte('{')
		for n := 0; ; n++ {
			s.skipSpace()
			if s.raw[s.i] == '}' {
				break
			}
			if s.raw[s.i] == ',' {
				s.i++
				s.skipSpace()
			}
			if n > 0 {
				s.out.WriteByte(',')
			}
			tok := s.stringToken()
			key := decodeJSONString(tok)
			s.writeString(tok, key)
			s.skipSpace()
			s.i++ // the colon
			s.out.WriteByte(':')
			s.value(s.m.Sensitive(key))
		}
		s.i++
		s.out.WriteByte('}')
	case '[':
		s.i++
		s.out.WriteByte('[')
		for n := 0; ; n++ {
			s.skipSpace()
			if s.raw[s.i] == ']' {
				break
			}
			if s.raw[s.i] == ',' {
				s.i++
			}
			if n > 0 {
				s.out.WriteByte(',')
			}
			s.value(false)
		}
		s.i++
		s.out.WriteByte(']')
	case '"':
		tok := s.stringToken()
		s.writeString(tok, "")
	default: // a number, true, false or null: as written
		s.skipScalar()
		s.out.Write(s.raw[start:s.i])
	}
}

// stringToken returns the string at s.i, quotes included, and moves past it.
func (s *maskScanner) stringToken() []byte {
	start := s.i
	s.i++
	for s.raw[s.i] != '"' {
		if s.raw[s.i] == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	return s.raw[start:s.i]
}

func (s *maskScanner) skipScalar() {
	for s.i < len(s.raw) {
		switch s.raw[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return
		}
		s.i++
	}
}

// skipValue moves past the value at s.i.
func (s *maskScanner) skipValue() {
	switch s.raw[s.i] {
	case '"':
		s.stringToken()
	case '{', '[':
		depth := 0
		for {
			switch s.raw[s.i] {
			case '"':
				s.stringToken()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default:
		s.skipScalar()
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
		decoded = decodeJSONString(tok)
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

// decodeJSONString decodes a string token: directly when it has no escape
// and is valid UTF-8, else as encoding/json does (which also replaces
// invalid UTF-8, as the token decoder did).
func decodeJSONString(tok []byte) string {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	var v string
	_ = json.Unmarshal(tok, &v)
	return v
}
