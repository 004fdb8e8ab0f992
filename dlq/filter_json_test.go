package dlq_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// A filter's JSON is its own fields, its times the instants they meant:
// what an operation stores and the API's body carries, read back the same,
// without the page.
func TestFilterJSON(t *testing.T) {
	at := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	f := dlq.Filter{Task: "billing.charge", Status: dlq.StatusPending, Fingerprints: []string{"00000000000000aa", "00000000000000bb"},
		Since: dlq.TimeBound{Raw: "24h", At: at}, Limit: 20, After: &dlq.Cursor{ID: 7, FailedAt: at}}
	raw, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"task":"billing.charge","status":"pending","fingerprints":["00000000000000aa","00000000000000bb"],"since":"2026-12-07T09:30:00Z"}`
	if string(raw) != want {
		t.Fatalf("JSON %s, want %s", raw, want)
	}
	var back dlq.Filter
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Since.At.Equal(at) || back.Since.Raw != "2026-12-07T09:30:00Z" || back.Task != f.Task || back.Limit != 0 || back.After != nil {
		t.Fatalf("read back as %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"since": "yesterday"}`), &back); err == nil {
		t.Fatal("a since that is no time was read")
	}
}

// Validate holds a filter from any source to the query string's rules,
// naming each bad field.
func TestFilterValidate(t *testing.T) {
	if err := (dlq.Filter{Task: "billing.charge", Status: dlq.StatusPending}).Validate(); err != nil {
		t.Fatalf("a plain filter: %v", err)
	}
	at := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	bad := dlq.Filter{Task: "bad task", Status: "lost", Reason: "why", Q: "ab", Fingerprint: "nothex",
		Since: dlq.TimeBound{Raw: "x", At: at}, Until: dlq.TimeBound{Raw: "y", At: at.Add(-time.Hour)}, Limit: dlq.MaxLimit + 1}
	err := bad.Validate()
	var ve *dlq.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, dlq.ErrInvalid) {
		t.Fatalf("got %v, want a validation error", err)
	}
	for _, field := range []string{"task", "status", "reason", "q", "fingerprint", "until", "limit"} {
		if ve.Fields[field] == "" {
			t.Errorf("no problem named for %s in %v", field, ve.Fields)
		}
	}
	if !strings.Contains(ve.Fields["fingerprint"], `"nothex"`) {
		t.Errorf("the group problem %q does not quote the id", ve.Fields["fingerprint"])
	}
}
