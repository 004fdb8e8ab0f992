package dlq

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"time"
)

// Cursor marks a position in the dead-letter list, which is ordered newest
// first on (failed_at, id): the next page holds the rows strictly after it.
// Keyset pagination rather than OFFSET, because OFFSET reads and throws away
// every skipped row, and page 2,000 of a million letters would scan 100,000
// rows; a cursor page is one index range scan wherever it starts.
type Cursor struct {
	FailedAt time.Time
	ID       int64
}

// ErrBadCursor is why a cursor string was refused.
var ErrBadCursor = errors.New("invalid cursor")

// The encoding is a version byte, failed_at in Unix microseconds (Postgres'
// own precision) and the id, each big-endian, as unpadded base64url. It is
// opaque to clients but not secret: a hand-made cursor can only choose where
// a listing starts, which the filters allow anyway, so no HMAC; it is still
// checked strictly so a mangled one is a clear 400, never a 500.
const (
	cursorVersion = 1
	cursorBytes   = 1 + 8 + 8
)

// cursorEncoding rejects non-zero padding bits, so each cursor has exactly
// one spelling and String(ParseCursor(s)) == s.
var cursorEncoding = base64.RawURLEncoding.Strict()

// Oldest and newest failed_at a cursor may carry: anything outside is not a
// time a letter can have failed at, and would overflow time arithmetic.
var (
	cursorMinTime = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	cursorMaxTime = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
)

// CursorAfter returns the cursor that continues after letter d.
func CursorAfter(d DeadLetter) Cursor {
	return Cursor{FailedAt: d.FailedAt.UTC().Truncate(time.Microsecond), ID: d.ID}
}

// String encodes c for a URL.
func (c Cursor) String() string {
	var b [cursorBytes]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.FailedAt.UnixMicro()))
	binary.BigEndian.PutUint64(b[9:], uint64(c.ID))
	return cursorEncoding.EncodeToString(b[:])
}

// ParseCursor decodes a cursor made by String, refusing anything else with
// ErrBadCursor.
func ParseCursor(s string) (Cursor, error) {
	if cursorEncoding.DecodedLen(len(s)) != cursorBytes {
		return Cursor{}, ErrBadCursor
	}
	b, err := cursorEncoding.DecodeString(s)
	if err != nil || len(b) != cursorBytes || b[0] != cursorVersion {
		return Cursor{}, ErrBadCursor
	}
	micros := int64(binary.BigEndian.Uint64(b[1:9]))
	id := int64(binary.BigEndian.Uint64(b[9:]))
	if id <= 0 || micros < cursorMinTime.UnixMicro() || micros > cursorMaxTime.UnixMicro() {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{FailedAt: time.UnixMicro(micros).UTC(), ID: id}, nil
}
