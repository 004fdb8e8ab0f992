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
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`), "<uuid>"},
	{regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`), "<email>"},
	{regexp.MustCompile(`\b\d{1,3}(\.\d{1,3}){3}(:\d+)?\b`), "<ip>"},
	{regexp.MustCompile(`"[^"]*"|'[^']*'`), "<str>"},
	{regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b|\b[0-9a-f]*\d[0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*\d[0-9a-f]*\b`), "<hex>"},
	{regexp.MustCompile(`\d+(\.\d+)?`), "<n>"},
	{regexp.MustCompile(`\s+`), " "},
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
		msg = n.re.ReplaceAllString(msg, n.with)
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
