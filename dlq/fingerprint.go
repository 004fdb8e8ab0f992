package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// The normaliser replaces the parts of an error message that differ between
// occurrences of the same bug — ids, numbers, addresses, quoted values — so
// that "user 17 not found" and "user 4242 not found" share one fingerprint.
// Order matters: the wider patterns run first.
//
// Each pattern comes with a test of a byte that every match of it must
// contain: a message without that byte is left as it is without running
// the regexp. The dead-lettering worker fingerprints every letter on the
// completer's one goroutine, and the regexps were about 30% of its CPU
// (pprof of the dead-lettering benchmark) for messages most of which have
// no uuid, address, quote or number at all.
var normalisers = []struct {
	re       *regexp.Regexp
	with     string
	mayMatch func(string) bool
}{
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>", hasByte('-')},
	{regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`), "<email>", hasByte('@')},
	{regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`), "<ip>", hasDigit},
	{regexp.MustCompile(`"[^"]*"|'[^']*'`), "<str>", hasQuote},
	// 0x needs its 0; the other two alternatives a \d each.
	{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b|\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b`), "<hex>", hasDigit},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>", hasDigit},
	// Replacing a lone space with a space changes nothing.
	{regexp.MustCompile(`\s+`), " ", foldsSpace},
}

func hasByte(b byte) func(string) bool {
	return func(s string) bool { return strings.IndexByte(s, b) >= 0 }
}

// hasDigit reports an ASCII digit: \d in RE2 is [0-9].
func hasDigit(s string) bool { return strings.ContainsAny(s, "0123456789") }

func hasQuote(s string) bool { return strings.ContainsAny(s, `"'`) }

// foldsSpace reports whether \s+ → " " would change s: some \s ([\t\n\f\r ]
// in RE2) other than a space, or two in a row.
func foldsSpace(s string) bool {
	prev := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\t', '\n', '\f', '\r':
			return true
		case ' ':
			if prev {
				return true
			}
			prev = true
		default:
			prev = false
		}
	}
	return false
}

// NormaliseMessage strips the variable parts from an error message.
func NormaliseMessage(msg string) string {
	// Only the first line and the first 500 bytes decide the group: long
	// messages often embed whole payloads further down.
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 500 {
		msg = msg[:500]
	}
	for _, n := range normalisers {
		if n.mayMatch(msg) {
			msg = n.re.ReplaceAllString(msg, n.with)
		}
	}
	return strings.TrimSpace(msg)
}

// Fingerprint identifies a class of failure: the same task failing with the
// same error class and the same normalised message. It is 16 hex digits of
// SHA-256, short enough for a URL and wide enough never to collide in practice.
func Fingerprint(task, errorClass, message string) string {
	sum := sha256.Sum256([]byte(task + "\x00" + errorClass + "\x00" + NormaliseMessage(message)))
	return hex.EncodeToString(sum[:8])
}
