package dlq

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAttemptsAppendJSONIsJSONMarshal holds the hand-written encoder to
// encoding/json's bytes, on the strings that need escaping.
func TestAttemptsAppendJSONIsJSONMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	for _, a := range []Attempts{
		nil,
		{},
		{{Attempt: 1, At: at, Class: "ValueError", Message: "bad", Outcome: OutcomeDead}},
		{{Attempt: 2, At: at.In(time.FixedZone("x", -7*3600)), Worker: "w-1", Host: "h", Version: "v1.2",
			Class: "E", Message: "", Traceback: "Traceback (most recent call last):\n  File \"x.py\", line 1\n\tboom",
			Outcome: OutcomeRetry, RetryInMS: 1500, DurationMS: 12}, {Attempt: 3, At: at.Add(time.Second), Class: "E",
			Message: "again", Outcome: OutcomeLeaseExpired}},
		{{Attempt: -1, At: time.Time{}, Class: `quote " backslash \ slash /`, Message: "<script>&amp;</script>",
			Outcome: "weird\u2028line\u2029sep", Traceback: "ctl \x00\x01\x07\b\f\x1f\x7f é 日本 😀",
			Worker: "bad utf8 \xff\xfe end \xe2\x82", Host: "ok"}},
	} {
		want, err := json.Marshal([]Attempt(a))
		if err != nil {
			t.Fatal(err)
		}
		if a == nil {
			want = []byte("[]") // Value writes an empty history for nil
		}
		got, err := a.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	}
}

func TestAttemptAppendJSONRefusesWhatJSONMarshalRefuses(t *testing.T) {
	t.Parallel()
	a := Attempts{{Attempt: 1, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
	if _, err := json.Marshal([]Attempt(a)); err == nil {
		t.Fatal("json.Marshal accepted year 10000; the test's premise is gone")
	}
	if _, err := a.AppendJSON(nil); err == nil {
		t.Error("appendJSON accepted year 10000")
	}
}

func BenchmarkAttemptsJSON(b *testing.B) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	var a Attempts
	for n := 1; n <= 5; n++ {
		a = append(a, Attempt{Attempt: n, At: at, Worker: "worker-7d9f4c-x2kqp-7", Host: "worker-7d9f4c-x2kqp",
			Version: "v1.14.2", Class: "PaymentGatewayTimeout", Message: "POST https://api.stripe.com/v1/charges timed out after 30s (order ord_8f3k2)",
			Outcome: OutcomeRetry, RetryInMS: 5000 << n})
	}
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal([]Attempt(a)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = a.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
