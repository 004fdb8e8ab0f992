package handlers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

func TestHumanDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                           "0 ms",
		120 * time.Millisecond:      "120 ms",
		2300 * time.Millisecond:     "2.3 s",
		5 * time.Second:             "5 s",
		61 * time.Second:            "1 min 1 s",
		4 * time.Minute:             "4 min",
		2*time.Hour + 5*time.Minute: "2 h 5 min",
		3 * time.Hour:               "3 h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

func TestWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    dlq.DeadLetter
		want string
	}{
		{dlq.DeadLetter{Reason: dlq.ReasonExhausted, Attempts: 5, MaxAttempts: 5}, "Exhausted 5/5 attempts"},
		{dlq.DeadLetter{Reason: dlq.ReasonPermanent, Attempts: 1, MaxAttempts: 5}, "Permanent error at attempt 1"},
		{dlq.DeadLetter{Reason: dlq.ReasonLeaseExpired, Attempts: 3, MaxAttempts: 3}, "Lease expired: the worker vanished on attempt 3/3"},
	} {
		if got := why(tc.d); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q", tc.d.Reason, got)
		}
	}
}

func TestSplitTraceback(t *testing.T) {
	t.Parallel()
	short := strings.Repeat("l\n", 44) + "end"
	if head, rest, n := splitTraceback(short); rest != "" || n != 45 || head != short {
		t.Fatalf("45 lines stay whole: %d lines, rest %q", n, rest)
	}
	long := strings.Repeat("l\n", 99) + "end\n"
	head, rest, n := splitTraceback(long)
	if n != 100 || strings.Count(head, "\n") != 39 || strings.Count(rest, "\n") != 59 || !strings.HasSuffix(rest, "end") {
		t.Fatalf("100 lines: head %d lines, rest %d lines, n %d", strings.Count(head, "\n")+1, strings.Count(rest, "\n")+1, n)
	}
	if head+"\n"+rest != strings.TrimSuffix(long, "\n") {
		t.Fatal("head and rest must rejoin to the whole")
	}
}

func TestLogsURL(t *testing.T) {
	t.Parallel()
	a := dlq.Attempt{At: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), DurationMS: 60_000}
	got := logsURL("https://logs/q?j={job_id}&t={task}&from={from}&to={to}", 42, "a b&c", a)
	want := "https://logs/q?j=42&t=a+b%26c&from=2026-03-01T09%3A58%3A00Z&to=2026-03-01T10%3A01%3A00Z"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if logsURL("", 1, "t", a) != "" {
		t.Fatal("no template, no link")
	}
}

func TestPrettyJSON(t *testing.T) {
	t.Parallel()
	body, note := prettyJSON(json.RawMessage(`{"a":[1,2]}`))
	if body != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" || note != "" {
		t.Fatalf("%q %q", body, note)
	}
	huge := json.RawMessage(`["` + strings.Repeat("x", payloadCap) + `"]`)
	body, note = prettyJSON(huge)
	if len(body) != payloadCap || !strings.Contains(note, "256 KiB") {
		t.Fatalf("huge payload: %d bytes, note %q", len(body), note)
	}
}

func TestCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"=1+1": "'=1+1", "+x": "'+x", "-x": "'-x", "@x": "'@x", "ok": "ok", "": ""} {
		if got := cell(in); got != want {
			t.Errorf("%q: %q", in, got)
		}
	}
}

func TestOutcomeText(t *testing.T) {
	for o, want := range map[dlq.Outcome]string{
		dlq.OutcomeRetry: "failed, retried",
		dlq.OutcomeLost:  "ran, but its outcome could not be recorded (counted)",
		"":               "failed",
		"something_new":  "something_new",
	} {
		if got := outcomeText(o); got != want {
			t.Errorf("outcomeText(%q) = %q; want %q", o, got, want)
		}
	}
}
