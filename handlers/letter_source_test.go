package handlers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web/webtest"
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
	if why := doc.Find(`[data-testid="replay-refused"]`).Text(); !strings.Contains(why, "names no replay endpoint") {
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

// A token limited to some sources (the credential another system keeps)
// sends their letters and does nothing else: another source's letters, a
// read and an action are refused. Such a token is made only for an
// operator or an admin, and only for configured http sources.
func TestTokenThatSendsLettersOnly(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ctx := context.Background()
	if err := a.store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}, {Name: "other", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.Access.CreateToken(ctx, dlq.NewToken{UserName: "olga", Label: "legacy-sender", Sources: []string{"legacy"},
		Hash: dlq.HashToken(secret), Actor: dlq.Actor{Name: "test"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	letter := func(source string) string {
		return `{"source": "` + source + `", "letters": [{"external_id": "1", "task": "billing.charge", "error_class": "E",
			"error": "boom", "failed_at": "2026-12-07T06:00:00Z"}]}`
	}
	rec, body := a.api(t, secret, "POST", "/api/v1/letters", letter("legacy"))
	if rec.Code != http.StatusCreated {
		t.Fatalf("its own source: %d %s", rec.Code, rec.Body)
	}
	// It also says how the replays of its letters went, and of no others.
	id := int64(body["letters"].([]any)[0].(map[string]any)["id"].(float64))
	other, _ := a.api(t, a.olgaAPI, "POST", "/api/v1/letters", letter("other"))
	if other.Code != http.StatusCreated {
		t.Fatalf("a letter of other: %d %s", other.Code, other.Body)
	}
	if _, err := a.db.Exec(`INSERT INTO source_replays (dead_letter_id, source, external_id, state, run_at, sent_at)
		SELECT dead_letter_id, source, external_id, 'sent', now(), now() FROM letter_sources`); err != nil {
		t.Fatal(err)
	}
	if rec, _ := a.api(t, secret, "POST", fmt.Sprintf("/api/v1/letters/%d/outcome", id), `{"state": "succeeded"}`); rec.Code != http.StatusOK {
		t.Errorf("the outcome of its letter's replay: %d %s", rec.Code, rec.Body)
	}
	var otherID int64
	if err := a.db.Get(&otherID, `SELECT dead_letter_id FROM letter_sources WHERE source = 'other'`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", fmt.Sprintf("/api/v1/letters/%d/outcome", otherID), `{"state": "succeeded"}`},
		{"POST", "/api/v1/letters", letter("other")},
		{"GET", "/api/v1/dead-letters", ""},
		{"POST", "/api/v1/dead-letters/1/discard", `{"reason": "x"}`},
	} {
		if rec, _ := a.api(t, secret, c.method, c.path, c.body); rec.Code != http.StatusForbidden {
			t.Errorf("%s %s: %d %s; want 403", c.method, c.path, rec.Code, rec.Body)
		}
	}
	for name, nt := range map[string]dlq.NewToken{
		"a viewer's":        {UserName: "vic", Sources: []string{"legacy"}},
		"an unknown source": {UserName: "olga", Sources: []string{"nobody"}},
		"Redrive's queue":   {UserName: "olga", Sources: []string{dlq.RedriveSource}},
	} {
		nt.Hash, nt.Now, nt.Actor, nt.Label = dlq.HashToken(name), time.Now(), dlq.Actor{Name: "test"}, name
		if _, err := a.store.Access.CreateToken(ctx, nt); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("%s token: %v, want refused", name, err)
		}
	}
}

// The list narrows to one source's letters (Redrive's own are those no
// other source sent), and the admin page of sources counts each one's
// letters and links them to that list.
func TestSourcesListAndPage(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ctx := context.Background()
	if err := a.store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP}}); err != nil {
		t.Fatal(err)
	}
	own := a.letters(t, 2, "email.send")
	rec, _ := a.api(t, a.olgaAPI, "POST", "/api/v1/letters", `{"source": "legacy", "letters": [{"external_id": "1", "task": "billing.charge",
		"error_class": "E", "error": "boom", "failed_at": "2026-12-07T06:00:00Z"}]}`)
	if rec.Code != http.StatusCreated {
		t.Fatalf("ingest: %d %s", rec.Code, rec.Body)
	}
	for source, want := range map[string]int{"legacy": 1, dlq.RedriveSource: len(own)} {
		_, doc := a.page(t, a.vic, "/dead-letters?status=all&source="+source)
		if n := doc.Find(`tr[data-testid="letter-row"]`).Length(); n != want {
			t.Errorf("source %s: %d rows, want %d", source, n, want)
		}
		if v, _ := doc.Find(`input[name="source"]`).Attr("value"); v != source {
			t.Errorf("source %s: the filter shows %q", source, v)
		}
	}
	if res, _ := a.page(t, a.vic, "/dead-letters?source=bad%20name"); res.Code != http.StatusBadRequest {
		t.Errorf("a bad source name: %d, want 400", res.Code)
	}

	webtest.CreateUser(t, a.store.Access, "ada", dlq.RoleAdmin)
	ada := webtest.SignIn(t, a.h, "ada", webtest.Password)
	res, doc := a.page(t, ada, "/admin/sources")
	if res.Code != http.StatusOK {
		t.Fatalf("sources page: %d", res.Code)
	}
	rows := map[string]string{}
	doc.Find(`tr[data-testid="source-row"]`).Each(func(_ int, r *goquery.Selection) {
		name, _ := r.Attr("data-source")
		rows[name] = strings.TrimSpace(r.Find(`[data-testid="source-letters"]`).Text()) + "/" + strings.TrimSpace(r.Find(`[data-testid="source-pending"]`).Text())
	})
	if rows[dlq.RedriveSource] != "2/2" || rows["legacy"] != "1/1" {
		t.Errorf("letters/pending by source: %v", rows)
	}
	if res, _ := a.page(t, a.olga, "/admin/sources"); res.Code != http.StatusForbidden {
		t.Errorf("an operator on the sources page: %d, want 403", res.Code)
	}
}
