package views

import (
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
)

// AbsTime formats t as the absolute UTC time shown on hover.
func AbsTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// Number formats n with thousands separators: 1234567 → "1,234,567".
func Number(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// URL marks a URL built by the handlers from trusted parts as safe for href.
func URL(s string) templ.SafeURL { return templ.SafeURL(s) }
