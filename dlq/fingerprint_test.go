package dlq_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// fingerprintMessages are messages of every shape the normalisers handle,
// and of none.
var fingerprintMessages = []string{
	"bench: card declined (permanent)",
	"user 17 not found",
	"user  4242\tnot found\r\n second line 99",
	"order 3f2b9c1e-8a4d-4c2e-9b7a-1d2e3f4a5b6c failed",
	"ORDER 3F2B9C1E-8A4D-4C2E-9B7A-1D2E3F4A5B6C FAILED",
	"mail to jane.doe+x@example.co.uk bounced",
	"connect 10.0.0.12:5432 refused",
	`key "abc" and 'def' missing`,
	"pointer 0xdeadBEEF at a1b2c3 and cafe and 1e9",
	"took 3.25s, retry 2",
	"  leading and trailing  ",
	"tabs\tonly",
	"no\fform\vfeed",
	"dashes-only - and-more",
	"",
	"\xff\xfe invalid utf8 12",
	"unicode space\u00a0here and\u2003there",
	strings.Repeat("x1 ", 300),
}

// TestNormaliseMessageSkipsOnlyWhatCannotMatch: skipping a regexp whose
// required byte is absent changes no message's normal form, so no letter
// changes group.
func TestNormaliseMessageSkipsOnlyWhatCannotMatch(t *testing.T) {
	for _, m := range fingerprintMessages {
		if got, want := dlq.NormaliseMessage(m), dlq.NormaliseMessageEveryRegexp(m); got != want {
			t.Errorf("NormaliseMessage(%q) = %q, every regexp gives %q", m, got, want)
		}
	}
	if got := dlq.NormaliseMessage("user 17 not found"); got != "user <n> not found" {
		t.Errorf("NormaliseMessage = %q", got)
	}
}

func FuzzNormaliseMessageSkipsOnlyWhatCannotMatch(f *testing.F) {
	for _, m := range fingerprintMessages {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, m string) {
		if got, want := dlq.NormaliseMessage(m), dlq.NormaliseMessageEveryRegexp(m); got != want {
			t.Fatalf("NormaliseMessage(%q) = %q, every regexp gives %q", m, got, want)
		}
	})
}

// BenchmarkFingerprint is the worker's cost per dead letter, for the
// dead-lettering benchmark's message and a message with numbers.
func BenchmarkFingerprint(b *testing.B) {
	for _, m := range []string{"bench: card declined (permanent)", "user 4242 not found after 3 tries"} {
		b.Run(m, func(b *testing.B) {
			for b.Loop() {
				dlq.Fingerprint("bench.fail", "PermanentError", m)
			}
		})
	}
}
