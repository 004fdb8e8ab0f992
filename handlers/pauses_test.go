package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func TestPauseAPI(t *testing.T) {
	t.Parallel()

	t.Run("PauseListResume", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", `{"task": "billing.charge", "reason": "provider down", "for": "30m"}`)
		if rec.Code != http.StatusCreated {
			t.Fatalf("pause: %d %v", rec.Code, body)
		}
		p := body["pause"].(map[string]any)
		if p["paused_by"] != "olga" || p["kind"] != "task" || p["until"] == nil {
			t.Fatalf("pause: %v", p)
		}
		id := int64(num(p["id"]))
		rec, body = a.api(t, a.vicAPI, http.MethodGet, "/api/v1/pauses", "")
		if rec.Code != http.StatusOK || len(body["pauses"].([]any)) != 1 {
			t.Fatalf("list as viewer: %d %v", rec.Code, body)
		}
		// Pausing what is already paused: 409 naming the open pause.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", `{"task": "billing.charge", "reason": "again"}`)
		msg, _ := body["error"].(map[string]any)["message"].(string)
		if rec.Code != http.StatusConflict || !strings.Contains(msg, "already paused") || !strings.Contains(msg, "olga") {
			t.Fatalf("second pause: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodDelete, fmt.Sprintf("/api/v1/pauses/%d", id), "")
		if rec.Code != http.StatusOK || body["pause"].(map[string]any)["resumed_by"] != "olga" {
			t.Fatalf("resume: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/pauses/%d/resume", id), "")
		msg, _ = body["error"].(map[string]any)["message"].(string)
		if rec.Code != http.StatusConflict || !strings.Contains(msg, "already ended") {
			t.Fatalf("second resume: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action IN ('pause', 'resume')`); n != 2 {
			t.Fatalf("%d audit entries, want 2", n)
		}
	})

	// A retry of the same pause with the same Idempotency-Key answers the
	// first pause (200, repeated) even when its expiry is relative: "for"
	// and a time of day name a later instant on every retry, and must not
	// make the retry look like another request (422).
	t.Run("KeyRepeatsARelativeExpiry", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		for i, body := range []string{
			`{"task": "billing.charge", "reason": "provider down", "for": "30m"}`,
			`{"queue": "default", "reason": "deploy", "until": "23:59"}`,
		} {
			key := []string{"Idempotency-Key", fmt.Sprintf("K-pause-%d", i)}
			rec, first := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", body, key...)
			if rec.Code != http.StatusCreated {
				t.Fatalf("%s: %d %v", body, rec.Code, first)
			}
			time.Sleep(5 * time.Millisecond) // on purpose: the retry comes later, as retries do, so that its relative expiry names a later instant
			rec, again := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", body, key...)
			if rec.Code != http.StatusOK || again["repeated"] != true ||
				num(again["pause"].(map[string]any)["id"]) != num(first["pause"].(map[string]any)["id"]) {
				t.Fatalf("%s sent again with its key: %d %v; want 200 repeating pause %v", body, rec.Code, again, first["pause"])
			}
			// Another expiry with the same key is another request.
			other := strings.Replace(strings.Replace(body, "30m", "45m", 1), "23:59", "23:58", 1)
			if rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", other, key...); rec.Code != http.StatusUnprocessableEntity {
				t.Fatalf("%s with the key of another: %d %v; want 422", other, rec.Code, body)
			}
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action = 'pause'`); n != 2 {
			t.Fatalf("%d pause audit entries, want 2", n)
		}
	})

	t.Run("ViewerCannotPauseOrResume", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		rec, body := a.api(t, a.vicAPI, http.MethodPost, "/api/v1/pauses", `{"queue": "default", "reason": "r"}`)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("viewer pause: %d %v", rec.Code, body)
		}
		_, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", `{"queue": "default", "reason": "r"}`)
		id := int64(num(body["pause"].(map[string]any)["id"]))
		for _, method := range []string{http.MethodDelete, http.MethodPost} {
			path := fmt.Sprintf("/api/v1/pauses/%d", id)
			if method == http.MethodPost {
				path += "/resume"
			}
			if rec, body := a.api(t, a.vicAPI, method, path, ""); rec.Code != http.StatusForbidden {
				t.Fatalf("viewer %s %s: %d %v", method, path, rec.Code, body)
			}
		}
		// The console's form too.
		if rec := a.post(t, a.vic, "/pauses", url.Values{"kind": {"task"}, "name": {"x"}, "reason": {"r"}}); rec.Code != http.StatusForbidden {
			t.Fatalf("viewer form: %d", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM pauses WHERE resumed_at IS NULL`); n != 1 {
			t.Fatalf("%d open pauses, want the operator's 1", n)
		}
	})

	t.Run("BadInputIsRefusedWithWords", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		for _, tc := range []struct{ body, field string }{
			{`{"task": "billing.charge"}`, "reason"},
			{`{"task": "billing.charge", "reason": "  "}`, "reason"},
			{`{"reason": "r"}`, "task"},
			{`{"task": "a", "queue": "b", "reason": "r"}`, "queue"},
			{`{"task": "has spaces", "reason": "r"}`, "task"},
			{`{"task": "t", "reason": "r", "until": "` + past + `"}`, "until"},
			{`{"task": "t", "reason": "r", "until": "half past two"}`, "until"},
			{`{"task": "t", "reason": "r", "for": "forever"}`, "for"},
			{`{"task": "t", "reason": "r", "for": "800h"}`, "for"},
			{`{"task": "t", "reason": "r", "for": "500ms"}`, "for"},
			{`{"task": "t", "reason": "r", "until": "` + time.Now().Add(40*24*time.Hour).UTC().Format(time.RFC3339) + `"}`, "until"},
			{`{"task": "t", "reason": "r", "for": "1h", "until": "14:30"}`, "until"},
		} {
			rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/pauses", tc.body)
			e, _ := body["error"].(map[string]any)
			fields, _ := e["fields"].(map[string]any)
			if rec.Code != http.StatusBadRequest || fields[tc.field] == nil || fields[tc.field] == "" {
				t.Errorf("%s: %d %v; want 400 naming %q", tc.body, rec.Code, body, tc.field)
			}
		}
		for _, tc := range []struct {
			method, path, body string
			status             int
		}{
			{http.MethodPost, "/api/v1/pauses", `{"task": "t", "reason": "r", "colour": "red"}`, http.StatusBadRequest},
			{http.MethodPost, "/api/v1/pauses", `{"task": `, http.StatusBadRequest},
			{http.MethodDelete, "/api/v1/pauses/abc", "", http.StatusBadRequest},
			{http.MethodDelete, "/api/v1/pauses/999", "", http.StatusNotFound},
			{http.MethodGet, "/api/v1/pauses?recent=zero", "", http.StatusBadRequest},
		} {
			if rec, body := a.api(t, a.olgaAPI, tc.method, tc.path, tc.body); rec.Code != tc.status {
				t.Errorf("%s %s %s: %d %v, want %d", tc.method, tc.path, tc.body, rec.Code, body, tc.status)
			}
		}
		if n := a.count(t, `SELECT count(*) FROM pauses`); n != 0 {
			t.Fatalf("refused requests left %d pauses", n)
		}
	})
}

func TestPauseConsole(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	a.letters(t, 1, "billing.charge")
	// The group's row offers the pause: one click to the form.
	_, doc := a.page(t, a.olga, "/groups")
	link := doc.Find(`[data-testid="pause-task-link"]`)
	if link.Length() != 1 || link.AttrOr("href", "") != "/pauses/new?task=billing.charge" {
		t.Fatalf("pause link on the group: %d %q", link.Length(), link.AttrOr("href", ""))
	}
	if _, vdoc := a.page(t, a.vic, "/groups"); vdoc.Find(`[data-testid="pause-task-link"]`).Length() != 0 {
		t.Fatal("a viewer is offered the pause link")
	}
	// So does the group's list of letters, and the jobs page of the task.
	groupHref := doc.Find(`[data-testid="group-link"]`).First().AttrOr("href", "")
	for _, path := range []string{groupHref, "/dead-letters?task=billing.charge", "/jobs?task=billing.charge"} {
		if _, d := a.page(t, a.olga, path); d.Find(`a[href="/pauses/new?task=billing.charge"]`).Length() != 1 {
			t.Errorf("%s offers no pause of its task", path)
		}
	}
	rec, doc := a.page(t, a.olga, "/pauses/new?task=billing.charge")
	if rec.Code != http.StatusOK {
		t.Fatalf("form: %d", rec.Code)
	}
	// One default wherever the form is opened, and the form says it.
	for path, d := range map[string]*goquery.Document{"/pauses/new": doc, "/pauses": func() *goquery.Document { _, d := a.page(t, a.olga, "/pauses"); return d }()} {
		if got := d.Find(`[data-testid="pause-for"] option[selected]`).AttrOr("value", "none"); got != "1h" {
			t.Errorf("%s: the pause form's default is %q; want 1h", path, got)
		}
		if !strings.Contains(d.Find(`.pause-expiry legend`).Text(), "after an hour unless you choose otherwise") {
			t.Errorf("%s: the form does not say its default", path)
		}
	}
	// No reason: the form again, the problem named, nothing paused.
	rec = a.submit(t, a.olga, doc, `[data-testid="pause-form"]`, url.Values{"reason": {""}})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "a reason is required") {
		t.Fatalf("no reason: %d", rec.Code)
	}
	rec = a.submit(t, a.olga, doc, `[data-testid="pause-form"]`, url.Values{"reason": {"provider down"}, "for": {""}, "until": {"23:59"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("pause: %d %.500s", rec.Code, rec.Body.String())
	}
	// The banner, on another page, names it all.
	_, doc = a.page(t, a.vic, "/dead-letters")
	banner := doc.Find(`[data-testid="pause-banner"]`)
	text := banner.Text()
	for _, want := range []string{"billing.charge", "olga", "provider down", "23:59"} {
		if !strings.Contains(text, want) {
			t.Errorf("banner %q lacks %q", strings.Join(strings.Fields(text), " "), want)
		}
	}
	if strings.Contains(text, "@") {
		t.Errorf("banner shows template text: %q", strings.Join(strings.Fields(text), " "))
	}
	if banner.Find(`[data-testid="pause-resume"]`).Length() != 0 {
		t.Error("a viewer sees the resume button")
	}
	_, doc = a.page(t, a.olga, "/")
	if doc.Find(`[data-testid="overview-pause"]`).Length() != 1 {
		t.Error("the overview does not list the pause")
	}
	// In the overview's ranked list (ol.ranked, as the top groups), the
	// link names what is held; the reason and who are beside it, not in it.
	if link := strings.Join(strings.Fields(doc.Find(`ol.ranked [data-testid="overview-pause"] a`).Text()), " "); link != "task billing.charge" {
		t.Errorf("the overview's pause links %q, want \"task billing.charge\" alone", link)
	}
	_, doc = a.page(t, a.olga, "/jobs")
	rec = a.submit(t, a.olga, doc, `[data-testid="pause-banner"] form`, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("resume from the banner: %d", rec.Code)
	}
	if _, doc = a.page(t, a.olga, "/jobs"); doc.Find(`[data-testid="pause-banner"]`).Length() != 0 {
		t.Fatal("the banner outlived the resume")
	}
	_, doc = a.page(t, a.olga, "/pauses")
	if ended := doc.Find(`[data-testid="pause-row"]`).Text(); !strings.Contains(ended, "resumed by olga") || strings.Contains(ended, "@") {
		t.Errorf("ended pauses: %q", strings.Join(strings.Fields(ended), " "))
	}
}
