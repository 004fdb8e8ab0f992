package dlq

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the history as the JSON array json.Marshal writes
// for it, byte for byte, without reflection. A bulk load writes one
// history a letter: through encoding/json that was a fifth of `redrive
// seed`'s client CPU (pprof), about 5 µs a letter; this takes about a
// fifth of that. TestAttemptsAppendJSONIsJSONMarshal holds it to
// encoding/json's output, escaping included.
func (a Attempts) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, '[')
	for i, at := range a {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = at.appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendJSON appends the attempt as json.Marshal writes it: the fields in
// their order, the omitempty ones only when set.
func (a Attempt) appendJSON(b []byte) ([]byte, error) {
	// time.Time.MarshalJSON refuses what RFC 3339 cannot write.
	if y := a.At.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("attempt %d: time %s has a year outside [0,9999]", a.Attempt, a.At)
	}
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"at":"`...)
	b = a.At.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendJSONField(b, "worker", a.Worker, true)
	b = appendJSONField(b, "host", a.Host, true)
	b = appendJSONField(b, "version", a.Version, true)
	b = appendJSONField(b, "class", a.Class, false)
	b = appendJSONField(b, "message", a.Message, false)
	b = appendJSONField(b, "traceback", a.Traceback, true)
	b = appendJSONField(b, "outcome", string(a.Outcome), false)
	if a.RetryInMS != 0 {
		b = append(b, `,"retry_in_ms":`...)
		b = strconv.AppendInt(b, a.RetryInMS, 10)
	}
	if a.DurationMS != 0 {
		b = append(b, `,"duration_ms":`...)
		b = strconv.AppendInt(b, a.DurationMS, 10)
	}
	b = appendJSONField(b, "logs", a.Logs, true)
	return append(b, '}'), nil
}

// appendJSONField appends ,"name":"value", or nothing when omitEmpty and
// the value is empty.
func appendJSONField(b []byte, name, value string, omitEmpty bool) []byte {
	if omitEmpty && value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendJSONString appends s quoted as encoding/json quotes a string: with
// its HTML escaping (<, > and & as \u003c, \u003e, \u0026), U+2028 and
// U+2029 escaped, and each byte of invalid UTF-8 as \ufffd. Runs of bytes
// that need no escape are copied whole; the loop's fast path is the check
// of one ASCII byte (htmlSafeASCII, inlined).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf && htmlSafeASCII(c) {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = appendEscapedASCII(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if esc := runeEscape(r, size); esc != "" {
			b = append(append(b, s[start:i]...), esc...)
			start = i + size
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// htmlSafeASCII reports whether encoding/json writes the ASCII byte c as
// it is: not a control character, quote, backslash or HTML's <, > and &.
func htmlSafeASCII(c byte) bool {
	return c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendEscapedASCII appends the escape of an ASCII byte that is not
// htmlSafeASCII: the short escapes encoding/json uses, else \u00XX.
func appendEscapedASCII(b []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
}

// runeEscape is what encoding/json writes for the rune r of size bytes
// instead of its bytes, or "" when it writes them as they are: \ufffd for
// a byte of invalid UTF-8, and U+2028 and U+2029 escaped (JavaScript reads
// them as line ends).
func runeEscape(r rune, size int) string {
	switch {
	case r == utf8.RuneError && size == 1:
		return `\ufffd`
	case r == '\u2028':
		return `\u2028`
	case r == '\u2029':
		return `\u2029`
	}
	return ""
}
