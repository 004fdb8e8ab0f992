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
// U+2029 escaped, and each byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
