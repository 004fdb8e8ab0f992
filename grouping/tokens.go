package grouping

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Wildcard stands for a variable part of a template.
const Wildcard = "<*>"

// A token is one word of a message as the miner compares it.
type token struct {
	text string
	// fixed tokens never become a variable: a quoted identifier (the
	// missing key of a KeyError, a constraint's name), a number that is a
	// code (a status, an errno, a signal). Two messages that differ in one
	// are two failures.
	fixed bool
}

// maxMessageBytes bounds what of a message decides its group: long messages
// often embed whole payloads after their first line and first few hundred
// bytes.
const maxMessageBytes = 500

// isDelimiter reports the bytes that separate tokens besides white space.
// They carry no meaning of their own for grouping, and splitting at them
// turns "host:port", "key=value" and "(a, b)" into their parts, so that a
// variable part never drags a constant one with it.
func isDelimiter(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', '\f', '\v',
		',', ';', '=', '(', ')', '[', ']', '{', '}', '<', '>', '"', '\'', '`', '|':
		return true
	}
	return false
}

// codeWords are words after which a number names a kind of failure rather
// than an occurrence: "status 502" and "status 429", "[Errno 111]" and
// "[Errno 110]", "signal 9", "exit code 137" are different failures.
var codeWords = map[string]bool{
	"status": true, "code": true, "errno": true, "error": true, "signal": true,
	"http": true, "sqlstate": true, "exit": true, "returned": true, "http/1.1": true,
}

// tokenize splits a message into tokens: its first line, at most
// maxMessageBytes, split at white space and delimiters. A token with a
// digit in it is data (an id, an amount, an address, a time) and becomes
// the wildcard at once, unless it is a code (codeWords) or the message's
// only token.
func tokenize(msg string) []token {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes]
		for len(msg) > 0 && !utf8.ValidString(msg[len(msg)-1:]) && msg[len(msg)-1] >= 0x80 {
			msg = msg[:len(msg)-1]
		}
	}
	var toks []token
	quote := byte(0)
	prevWord := ""
	for i := 0; i < len(msg); {
		b := msg[i]
		if isDelimiter(b) {
			if b == '"' || b == '\'' || b == '`' {
				if quote == b {
					quote = 0
				} else if quote == 0 && opensQuote(msg, i) {
					quote = b
				}
			}
			i++
			continue
		}
		j := i
		for j < len(msg) && !isDelimiter(msg[j]) {
			j++
		}
		word := trimPunct(msg[i:j])
		i = j
		if word == "" {
			continue
		}
		t := token{text: word}
		switch {
		case hasDigit(word) || strings.IndexByte(word, '@') >= 0:
			if isNumber(word) && codeWords[strings.ToLower(prevWord)] {
				t.fixed = true
			} else {
				t.text = maskData(word)
			}
		case quote != 0 && isIdentifier(word):
			t.fixed = true
		}
		toks = append(toks, t)
		prevWord = word
	}
	if len(toks) == 1 {
		toks[0].fixed = true
		if toks[0].text == Wildcard {
			toks[0].fixed = false
		}
	}
	return toks
}

// opensQuote reports whether the quote at msg[i] opens a quoted value: an
// apostrophe inside a word ("can't", "user's") does not.
func opensQuote(msg string, i int) bool {
	if msg[i] != '\'' || i == 0 {
		return true
	}
	r, _ := utf8.DecodeLastRuneInString(msg[:i])
	return !unicode.IsLetter(r)
}

// trimPunct strips the punctuation that ends or starts a word in prose
// ("failed:", "refused.", "...") but keeps it inside ("a.b", "x::y").
func trimPunct(w string) string {
	return strings.Trim(w, ".:!?…")
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			return true
		}
	}
	return false
}

// isNumber reports a short integer, perhaps signed: what codes look like.
func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" || len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isIdentifier reports a word made of letters, underscores, dots and
// dashes: a name in the code (a key, a constraint, a field), which names
// the failure.
func isIdentifier(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && r != '_' && r != '.' && r != '-' {
			return false
		}
	}
	return true
}

// maskData replaces the parts of a word that hold digits with the
// wildcard, keeping its other parts: "i-fetch......0x0000" keeps
// "i-fetch", "AirPort_Brcm43xx::syncPowerState" keeps "syncPowerState".
// Parts are split at any byte but a letter, a digit, '_' and '-'; an
// address, a path or a URL with an id, or an e-mail, is the wildcard whole.
func maskData(w string) string {
	if strings.IndexByte(w, '@') >= 0 || strings.Contains(w, "://") || strings.HasPrefix(w, "/") {
		return Wildcard
	}
	var b strings.Builder
	lastWild := false
	for i := 0; i < len(w); {
		j := i
		for j < len(w) && isWordByte(w[j]) {
			j++
		}
		if j > i {
			part := w[i:j]
			if hasDigit(part) {
				if !lastWild {
					b.WriteString(Wildcard)
				}
				lastWild = true
			} else {
				b.WriteString(part)
				lastWild = false
			}
			i = j
			continue
		}
		// A run of separators between two wildcards folds into them.
		k := i
		for k < len(w) && !isWordByte(w[k]) {
			k++
		}
		if !(lastWild && (k == len(w) || hasDigitPart(w[k:]))) {
			b.WriteString(w[i:k])
			lastWild = false
		}
		i = k
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c >= 0x80
}

// hasDigitPart reports whether s starts with a part holding a digit.
func hasDigitPart(s string) bool {
	j := 0
	for j < len(s) && isWordByte(s[j]) {
		j++
	}
	return hasDigit(s[:j])
}
