package dlq_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// What a sender leaves out is filled as the API documents; what it gets
// wrong is named field by field.
func TestIngestLetterNormalise(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	failed := now.Add(-time.Hour)
	l, err := dlq.IngestLetter{ExternalID: "t-1", Task: "billing.charge", ErrorClass: "KeyError", Message: "'sku'",
		FailedAt: failed, History: dlq.Attempts{{Class: "KeyError", Message: "'sku'"}, {Class: "KeyError", Message: "'sku'"}}}.Normalise(now)
	if err != nil {
		t.Fatal(err)
	}
	if l.Queue != dlq.DefaultQueue || string(l.Args) != "[]" || string(l.Kwargs) != "{}" || l.Attempts != 1 || l.MaxAttempts != 1 ||
		l.Reason != dlq.ReasonExhausted || !l.EnqueuedAt.Equal(failed) {
		t.Errorf("defaults: %+v", l)
	}
	if h := l.History; h[0].Attempt != 1 || h[1].Attempt != 2 || h[0].Outcome != dlq.OutcomeRetry || h[1].Outcome != dlq.OutcomeDead || !h[1].At.Equal(failed) {
		t.Errorf("history defaults: %+v", h)
	}
	if l, _ := (dlq.IngestLetter{ExternalID: "t-2", Task: "a", ErrorClass: "E", Attempts: 1, MaxAttempts: 5, FailedAt: failed}).Normalise(now); l.Reason != dlq.ReasonPermanent {
		t.Errorf("attempts left: reason %s, want permanent", l.Reason)
	}

	_, err = dlq.IngestLetter{Task: "bad task", Args: []byte(`{}`), ErrorClass: "", Message: "nul\x00", Attempts: 7, MaxAttempts: 3,
		Reason: dlq.ReasonKilled, FailedAt: now.Add(time.Hour), History: dlq.Attempts{{Outcome: "vanished"}}}.Normalise(now)
	var ve *dlq.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want a validation error", err)
	}
	for _, field := range []string{"external_id", "task", "args", "error_class", "error", "max_attempts", "reason", "failed_at", "history"} {
		if ve.Fields[field] == "" {
			t.Errorf("no problem named for %s in %v", field, ve.Fields)
		}
	}
	if !strings.Contains(ve.Fields["history"], "retry") {
		t.Errorf("the history's problem %q does not list the outcomes", ve.Fields["history"])
	}

	// An attempt's logs, which another system may send, are bounded and
	// must be text like the rest of it.
	for logs, want := range map[string]string{
		strings.Repeat("x", dlq.MaxAttemptLogBytes+1): "at most 64 KiB",
		"level=INFO msg=\"nul\x00\"\n":                "UTF-8 text",
	} {
		_, err = dlq.IngestLetter{ExternalID: "t-3", Task: "a", ErrorClass: "E", FailedAt: failed,
			History: dlq.Attempts{{Class: "E", Logs: logs}}}.Normalise(now)
		if !errors.As(err, &ve) || !strings.Contains(ve.Fields["history"], want) {
			t.Errorf("logs of %d bytes: got %v, want a history problem saying %q", len(logs), err, want)
		}
	}
}

func TestRiverExternalID(t *testing.T) {
	t.Parallel()
	if id := dlq.RiverExternalID(123, 4); id != "123/4" {
		t.Fatalf("RiverExternalID = %q", id)
	}
	if job, attempt, err := dlq.ParseRiverExternalID("123/4"); err != nil || job != 123 || attempt != 4 {
		t.Errorf("ParseRiverExternalID(123/4) = %d, %d, %v", job, attempt, err)
	}
	for _, bad := range []string{"", "123", "x/1", "0/1", "-5/1", "12/x", "12/-1", "celery-7f3a"} {
		if _, _, err := dlq.ParseRiverExternalID(bad); err == nil {
			t.Errorf("ParseRiverExternalID(%q) accepted", bad)
		}
	}
}
