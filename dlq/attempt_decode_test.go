package dlq

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeAttemptsAsUnmarshal: whatever the bytes, a history the hand
// decoder takes is what json.Unmarshal makes of it, and it takes nothing
// json.Unmarshal refuses.
func FuzzDecodeAttemptsAsUnmarshal(f *testing.F) {
	at := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	for _, a := range []Attempts{
		{},
		{{Attempt: 1, At: at, Class: "ValueError", Message: "bad", Outcome: OutcomeDead}},
		{{Attempt: 2, At: at.In(time.FixedZone("x", -7*3600)), Worker: "w-1", Host: "h", Version: "v1.2",
			Class: "E", Traceback: "Traceback (most recent call last):\n  File \"x.py\", line 1\n\tboom",
			Outcome: OutcomeRetry, RetryInMS: 1500, DurationMS: 12, Logs: "level=info msg=\"x\""},
			{Attempt: 3, At: at.Add(time.Second), Class: "E", Message: "again <&>", Outcome: OutcomeLeaseExpired}},
		{{Attempt: -1, Class: `quote " backslash \ slash /`, Outcome: "weird\u2028line\u2029sep",
			Traceback: "ctl \x00\x01\x07\b\f\x1f\x7f é 日本 😀", Worker: "bad utf8 \xff\xfe end \xe2\x82"}},
	} {
		b, err := a.AppendJSON(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		` [ { "attempt" : 1 , "at" : "2025-03-14T15:09:26Z" } ] `, `[{"Attempt":1}]`, `[{"attempt":1.0}]`,
		`[{"attempt":01}]`, `[{"attempt":-0}]`, `[{"attempt":9223372036854775808}]`, `[{"at":null}]`, `null`,
		`[{"message":"a\u00e9\ud83d\ude00\ud800x"}]`, `[{"message":"\x"}]`, `[{"unknown":1}]`, `[{"at":"\u0032025"}]`,
		`[{"attempt":1,"attempt":2}]`, `[{}]`, `[1]`, `[{"class":"a"}] x`, `[{"class":"a"},]`, `[{"class":"a",}]`,
		`[{"class":"a" "message":"b"}]`, `[{"retry_in_ms":-12,"duration_ms":0}]`, `[{"outcome":"retry"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []Attempt
		werr := json.Unmarshal(b, &want)
		got, ok := decodeAttempts(b)
		if !ok {
			return
		}
		if werr != nil {
			t.Fatalf("took %q, which json.Unmarshal refuses: %v", b, werr)
		}
		if !reflect.DeepEqual([]Attempt(got), want) {
			t.Errorf("%q:\n got %+v\nwant %+v", b, got, want)
		}
	})
}

// TestDecodeAttemptsTakesWhatAppendJSONWrites: the histories Redrive
// writes are read by hand, not left to encoding/json.
func TestDecodeAttemptsTakesWhatAppendJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	h := Attempts{{Attempt: 1, At: at, Worker: "w", Host: "h", Version: "v1", Class: "E", Message: "card <declined>",
		Traceback: "Traceback:\n  File \"x.py\"\n\tboom é", Outcome: OutcomeRetry, RetryInMS: 1000, DurationMS: 5, Logs: "a=1"},
		{Attempt: 2, At: at.Add(time.Minute), Class: "E", Message: "again", Outcome: OutcomeDead}}
	b, err := h.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := decodeAttempts(b)
	if !ok || !reflect.DeepEqual(got, h) {
		t.Errorf("decodeAttempts(%s) = %+v, %v; want the history back by hand", b, got, ok)
	}
}
