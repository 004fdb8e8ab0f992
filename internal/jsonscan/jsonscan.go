// Package jsonscan moves through JSON already known to be valid
// (json.Valid), byte by byte, without decoding what it passes: the one
// pass that masking and the list's argument suggestions make over a
// letter's arguments. It checks nothing, so it must never be given JSON
// that has not been checked.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Cursor is a position I in the valid JSON Raw.
type Cursor struct {
	Raw []byte
	I   int
}

// SkipSpace moves past white space.
func (c *Cursor) SkipSpace() {
	for c.I < len(c.Raw) {
		switch c.Raw[c.I] {
		case ' ', '\t', '\n', '\r':
			c.I++
		default:
			return
		}
	}
}

// StringToken returns the string at I, quotes included, and moves past
// it.
func (c *Cursor) StringToken() []byte {
	start := c.I
	c.I++
	for c.Raw[c.I] != '"' {
		if c.Raw[c.I] == '\\' {
			c.I++
		}
		c.I++
	}
	c.I++
	return c.Raw[start:c.I]
}

// SkipScalar moves past the number, true, false or null at I.
func (c *Cursor) SkipScalar() {
	for c.I < len(c.Raw) {
		switch c.Raw[c.I] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return
		}
		c.I++
	}
}

// SkipValue moves past the value at I.
func (c *Cursor) SkipValue() {
	switch c.Raw[c.I] {
	case '"':
		c.StringToken()
	case '{', '[':
		depth := 0
		for {
			switch c.Raw[c.I] {
			case '"':
				c.StringToken()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			c.I++
			if depth == 0 {
				return
			}
		}
	default:
		c.SkipScalar()
	}
}

// DecodeString decodes a string token: directly when it has no escape and
// is valid UTF-8, else as encoding/json does (which replaces invalid
// UTF-8, as decoding into a map or a token decoder does).
func DecodeString(tok []byte) string {
	body := tok[1 : len(tok)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body)
	}
	var v string
	_ = json.Unmarshal(tok, &v)
	return v
}
