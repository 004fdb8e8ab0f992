package dlq

import (
	"strings"
	"unicode/utf8"
)

// StorableText reports whether Postgres text (and jsonb strings) can hold
// s: no NUL byte, valid UTF-8. IsUnstorableText recognises the database's
// refusal of anything else.
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// MakeStorable returns s with each NUL byte and each run of invalid UTF-8
// replaced by U+FFFD, so that it can always be written.
func MakeStorable(s string) string {
	if StorableText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
