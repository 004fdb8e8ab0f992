package dlq

import (
	_ "embed"
	"strings"
	"sync"
	"unicode/utf8"
)

// commonPasswordsText is a few thousand of the passwords most often seen
// in breaches; the file says where they come from.
//
//go:embed common_passwords.txt
var commonPasswordsText string

// commonPasswords is commonPasswordsText as a set, built on first use and
// never changed after.
var commonPasswords = sync.OnceValue(func() map[string]struct{} {
	set := map[string]struct{}{}
	for line := range strings.Lines(commonPasswordsText) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set[strings.ToLower(line)] = struct{}{}
	}
	return set
})

// IsCommonPassword reports whether pw, in any case, is on the bundled list
// of common passwords: the first words any guesser tries.
func IsCommonPassword(pw string) bool {
	_, ok := commonPasswords()[strings.ToLower(pw)]
	return ok
}

// oneCharRepeated reports whether s is a single character, repeated.
func oneCharRepeated(s string) bool {
	r, size := utf8.DecodeRuneInString(s)
	return size > 0 && strings.Count(s, string(r)) == utf8.RuneCountInString(s)
}
