package dlq

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeAttempts reads a history as json.Unmarshal reads it into
// []Attempt, by hand, when it is the JSON AppendJSON writes: an array of
// objects whose keys are Attempt's own, its strings strings and its
// numbers integers, with any white space. Decoding a letter's history
// with encoding/json was a fifth of the console's CPU for a letter's JSON
// (pprof), most of it matching keys to fields by reflection and checking
// the whole text before reading it. ok is false for anything else (a key
// in another case, a null, a float, JSON that is not valid), which the
// caller leaves to encoding/json: FuzzDecodeAttemptsAsUnmarshal holds the
// two to the same answer.
func decodeAttempts(b []byte) (out Attempts, ok bool) {
	p := attemptParser{b: b}
	p.space()
	if !p.next('[') {
		return nil, false
	}
	out = Attempts{}
	p.space()
	if p.next(']') {
		return out, p.end()
	}
	for {
		a, ok := p.attempt()
		if !ok {
			return nil, false
		}
		out = append(out, a)
		p.space()
		if p.next(']') {
			return out, p.end()
		}
		if !p.next(',') {
			return nil, false
		}
		p.space()
	}
}

// attemptParser reads b from i on.
type attemptParser struct {
	b []byte
	i int
}

func (p *attemptParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// next moves past c if it is the next byte.
func (p *attemptParser) next(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether nothing but white space is left.
func (p *attemptParser) end() bool {
	p.space()
	return p.i == len(p.b)
}

// attempt reads one object of the history.
func (p *attemptParser) attempt() (a Attempt, ok bool) {
	if !p.next('{') {
		return a, false
	}
	p.space()
	if p.next('}') {
		return a, true
	}
	for {
		key, ok := p.token()
		if !ok {
			return a, false
		}
		p.space()
		if !p.next(':') {
			return a, false
		}
		p.space()
		if !p.field(&a, string(key[1:len(key)-1])) {
			return a, false
		}
		p.space()
		if p.next('}') {
			return a, true
		}
		if !p.next(',') {
			return a, false
		}
		p.space()
	}
}

// field reads the value of key into a; false for a key Attempt's JSON does
// not name exactly or a value of another kind than its field's.
func (p *attemptParser) field(a *Attempt, key string) bool {
	var ok bool
	switch key {
	case "attempt":
		var n int64
		n, ok = p.integer()
		a.Attempt = int(n)
	case "at":
		var tok []byte
		if tok, ok = p.token(); ok {
			ok = a.At.UnmarshalJSON(tok) == nil
		}
	case "worker":
		a.Worker, ok = p.string()
	case "host":
		a.Host, ok = p.string()
	case "version":
		a.Version, ok = p.string()
	case "class":
		a.Class, ok = p.string()
	case "message":
		a.Message, ok = p.string()
	case "traceback":
		a.Traceback, ok = p.string()
	case "outcome":
		var s string
		s, ok = p.string()
		a.Outcome = Outcome(s)
	case "retry_in_ms":
		a.RetryInMS, ok = p.integer()
	case "duration_ms":
		a.DurationMS, ok = p.integer()
	case "logs":
		a.Logs, ok = p.string()
	}
	return ok
}

// token returns the string at i, quotes included, and moves past it; false
// for anything else or a string holding a byte JSON forbids in one.
func (p *attemptParser) token() ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	start := p.i - 1
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			return p.b[start:p.i], true
		case c == '\\':
			p.i += 2
		case c < 0x20:
			return nil, false
		default:
			p.i++
		}
	}
	return nil, false
}

// string reads a string value: its bytes when it has no escape and is
// valid UTF-8, else unescaped as encoding/json unescapes it.
func (p *attemptParser) string() (string, bool) {
	tok, ok := p.token()
	if !ok {
		return "", false
	}
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	return unescape(body)
}

// unescape decodes the body of a JSON string as encoding/json does: its
// escapes, a \u pair of UTF-16 surrogates as one rune and a lone one as
// U+FFFD, each byte of invalid UTF-8 as U+FFFD; false for an escape JSON
// does not have.
func unescape(body []byte) (string, bool) {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 == len(body) {
				return "", false
			}
			switch e := body[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(body[i+2:])
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if len(body) >= i+6 && body[i] == '\\' && body[i+1] == 'u' {
						if r2, ok := hex4(body[i+2:]); ok {
							if pair := utf16.DecodeRune(r, r2); pair != unicode.ReplacementChar {
								out = utf8.AppendRune(out, pair)
								i += 6
								continue
							}
						}
					}
					r = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, body[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// integer reads a number written as an integer (JSON's: no leading zero,
// no fraction or exponent) that fits in an int64; false for any other.
func (p *attemptParser) integer() (int64, bool) {
	start := p.i
	p.next('-')
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}
