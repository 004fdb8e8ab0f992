package postgres

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// escapeCopyTextSlowly is appendCopyText written the obvious way, to check
// the fast one against.
func escapeCopyTextSlowly(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return r.Replace(s)
}

func TestAppendCopyTextEscapesEveryPosition(t *testing.T) {
	// Bytes either side of the ones that need escaping, and high bytes,
	// around each special byte at every offset of a few 8-byte words.
	alphabet := []byte{'a', 0, 0x08, 0x0b, 0x0c, 0x0e, 0x1f, '[', ']', 0x5b, 0x5d, 0x7f, 0x80, 0xdc, 0xff}
	specials := []byte{'\\', '\n', '\r', '\t'}
	r := rand.New(rand.NewPCG(1, 2))
	for length := range 40 {
		for pos := range length {
			for _, special := range specials {
				b := make([]byte, length)
				for i := range b {
					b[i] = alphabet[r.IntN(len(alphabet))]
				}
				b[pos] = special
				want := escapeCopyTextSlowly(string(b))
				if got := string(appendCopyText([]byte("x"), string(b))); got != "x"+want {
					t.Fatalf("string %q: got %q, want %q", b, got[1:], want)
				}
				if got := string(appendCopyText(nil, b)); got != want {
					t.Fatalf("bytes %q: got %q, want %q", b, got, want)
				}
			}
		}
	}
	for range 2000 {
		b := make([]byte, r.IntN(100))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		if got, want := string(appendCopyText(nil, b)), escapeCopyTextSlowly(string(b)); got != want {
			t.Fatalf("%q: got %q, want %q", b, got, want)
		}
	}
}
