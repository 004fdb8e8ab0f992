package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// A letter another system sent, on its page and through the API: it says
// where it came from and its id there instead of a job, offers no replay
// (with the reason) but a discard, and a replay through the API is
// refused, never enqueued into Redrive's own queue.
func TestLetterOfAnotherSource(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ctx := context.Background()
	if err := a.store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	rec, body := a.api(t, a.olgaAPI, "POST", "/api/v1/letters", `{"source": "legacy", "letters": [{"external_id": "celery-7f3a",
		"task": "billing.charge", "error_class": "ConnectionError", "error": "reset by peer", "failed_at": "2026-12-07T06:00:00Z"}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("ingest: %d %s", rec.Code, rec.Body)
	}
	id := int64(body["letters"].([]any)[0].(map[string]any)["id"].(float64))

	res, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", id))
	if res.Code != http.StatusOK {
		t.Fatalf("letter page: %d", res.Code)
	}
	if src := strings.Join(strings.Fields(doc.Find(`[data-testid="letter-source"]`).Text()), " "); src != "legacy, its id there celery-7f3a" {
		t.Errorf("source %q", src)
	}
	if doc.Find(`[data-testid="job-link"]`).Length() != 0 || doc.Find(`[data-testid="replay-form"]`).Length() != 0 {
		t.Error("the page links a job or offers a replay for a letter another system sent")
	}
	if why := doc.Find(`[data-testid="replay-refused"]`).Text(); !strings.Contains(why, "names no way to replay it") {
		t.Errorf("the refusal says %q", why)
	}
	if doc.Find(`[data-testid="discard-form"]`).Length() != 1 {
		t.Error("no discard offered")
	}

	rec, _ = a.api(t, a.olgaAPI, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), `{}`)
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "cannot be replayed") {
		t.Errorf("API replay: %d %s; want 409", rec.Code, rec.Body)
	}
	if n := a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
		t.Errorf("%d jobs enqueued by a refused replay", n)
	}
	rec, detail := a.api(t, a.vicAPI, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", id), "")
	if rec.Code != http.StatusOK || detail["source"] != "legacy" || detail["external_id"] != "celery-7f3a" {
		t.Errorf("API detail: %d source %v external id %v", rec.Code, detail["source"], detail["external_id"])
	}
}
