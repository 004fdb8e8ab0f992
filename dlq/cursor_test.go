package dlq_test

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

func TestCursor(t *testing.T) {
	t.Parallel()
	c := dlq.Cursor{FailedAt: time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC), ID: 987654321}
	s := c.String()
	got, err := dlq.ParseCursor(s)
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for name, bad := range map[string]string{
		"Empty":          "",
		"Truncated":      s[:len(s)-1],
		"Extended":       s + "A",
		"Padded":         s + "==",
		"NotBase64":      "!!!!!!!!!!!!!!!!!!!!!!",
		"StdAlphabet":    "+/+/+/+/+/+/+/+/+/+/+/",
		"WrongVersion":   dlqCursorBytes(t, 2, 1, 1),
		"ZeroID":         dlqCursorBytes(t, 1, c.FailedAt.UnixMicro(), 0),
		"NegativeID":     dlqCursorBytes(t, 1, c.FailedAt.UnixMicro(), -5),
		"TimeBefore1970": dlqCursorBytes(t, 1, -1, 5),
		"TimeAfter3000":  dlqCursorBytes(t, 1, 1<<62, 5),
	} {
		if _, err := dlq.ParseCursor(bad); !errors.Is(err, dlq.ErrBadCursor) {
			t.Errorf("%s: %q accepted (%v)", name, bad, err)
		}
	}
}

// dlqCursorBytes builds a cursor string by hand, as a tamperer would.
func dlqCursorBytes(t *testing.T, version byte, micros, id int64) string {
	t.Helper()
	b := make([]byte, 17)
	b[0] = version
	binary.BigEndian.PutUint64(b[1:9], uint64(micros))
	binary.BigEndian.PutUint64(b[9:], uint64(id))
	return base64.RawURLEncoding.EncodeToString(b)
}

// FuzzParseCursor: no input panics, and an accepted cursor has exactly one
// spelling, so its encoding is the input itself.
func FuzzParseCursor(f *testing.F) {
	f.Add(dlq.Cursor{FailedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ID: 1}.String())
	f.Add("AQAGRtSGl2AAAAAAAAAAACo")
	f.Add("AQAGRtSGl2AAAAAAAAAAACp")
	f.Add("")
	f.Add("====")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := dlq.ParseCursor(s)
		if err != nil {
			if !errors.Is(err, dlq.ErrBadCursor) {
				t.Fatalf("unexpected error kind %v", err)
			}
			return
		}
		if c.ID <= 0 {
			t.Fatalf("accepted a non-positive id %d", c.ID)
		}
		if c.String() != s {
			t.Fatalf("%q re-encodes as %q", s, c.String())
		}
	})
}
