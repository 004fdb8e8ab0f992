package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestThrottleAPI(t *testing.T) {
	t.Parallel()

	t.Run("ThrottleListChangeLift", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/throttles",
			`{"task": "billing.charge", "max_running": 3, "reason": "provider rate-limits us", "for": "30m"}`)
		if rec.Code != http.StatusCreated {
			t.Fatalf("throttle: %d %v", rec.Code, body)
		}
		th := body["throttle"].(map[string]any)
		if th["set_by"] != "olga" || th["kind"] != "task" || num(th["max_running"]) != 3 || th["max_per_second"] != nil || th["until"] == nil {
			t.Fatalf("throttle: %v", th)
		}
		id := int64(num(th["id"]))
		rec, body = a.api(t, a.vicAPI, http.MethodGet, "/api/v1/throttles", "")
		if rec.Code != http.StatusOK || len(body["throttles"].([]any)) != 1 {
			t.Fatalf("list as viewer: %d %v", rec.Code, body)
		}
		// A viewer may not change it.
		if rec, _ := a.api(t, a.vicAPI, http.MethodPatch, fmt.Sprintf("/api/v1/throttles/%d", id), `{"max_running": 9, "reason": "x"}`); rec.Code != http.StatusForbidden {
			t.Fatalf("change as viewer: %d", rec.Code)
		}
		// Throttling what is throttled: 409 naming the open throttle.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/throttles", `{"task": "billing.charge", "max_running": 1, "reason": "again"}`)
		msg, _ := body["error"].(map[string]any)["message"].(string)
		if rec.Code != http.StatusConflict || !strings.Contains(msg, "already throttled") || !strings.Contains(msg, "3 running at once") {
			t.Fatalf("second throttle: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPatch, fmt.Sprintf("/api/v1/throttles/%d", id),
			`{"max_running": 2, "max_per_second": 0.5, "reason": "slower still"}`)
		if th := body["throttle"].(map[string]any); rec.Code != http.StatusOK || num(th["max_running"]) != 2 || th["max_per_second"] != 0.5 || th["changed_by"] != "olga" {
			t.Fatalf("change: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodDelete, fmt.Sprintf("/api/v1/throttles/%d", id), "")
		if rec.Code != http.StatusOK || body["throttle"].(map[string]any)["lifted_by"] != "olga" {
			t.Fatalf("lift: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/throttles/%d/lift", id), "")
		msg, _ = body["error"].(map[string]any)["message"].(string)
		if rec.Code != http.StatusConflict || !strings.Contains(msg, "already ended") {
			t.Fatalf("second lift: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action LIKE 'throttle%'`); n != 3 {
			t.Fatalf("%d audit entries, want 3 (throttle, change, lift)", n)
		}
	})

	t.Run("BadInputIsRefusedInWordsAndChangesNothing", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		for body, field := range map[string]string{
			`{"task": "billing.charge", "reason": "r"}`:                               "max_running",
			`{"task": "billing.charge", "max_running": 0, "reason": "r"}`:             "max_running",
			`{"task": "billing.charge", "max_per_second": -1, "reason": "r"}`:         "max_per_second",
			`{"task": "billing.charge", "max_running": 2}`:                            "reason",
			`{"max_running": 2, "reason": "r"}`:                                       "task",
			`{"task": "a b", "max_running": 2, "reason": "r"}`:                        "task",
			`{"task": "billing.charge", "max_running": 2, "reason": "r", "for": "x"}`: "for",
		} {
			rec, got := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/throttles", body)
			fields, _ := got["error"].(map[string]any)["fields"].(map[string]any)
			if rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnprocessableEntity || fields[field] == nil {
				t.Errorf("%s: %d %v, want a refusal naming %q", body, rec.Code, got, field)
			}
		}
		if rec, _ := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/throttles", `{"task": "billing.charge", "max_running": "three"}`); rec.Code != http.StatusBadRequest {
			t.Errorf("a limit that is not a number: %d, want 400", rec.Code)
		}
		if rec, _ := a.api(t, a.olgaAPI, http.MethodPatch, "/api/v1/throttles/999", `{"max_running": 2, "reason": "r"}`); rec.Code != http.StatusNotFound {
			t.Errorf("changing a throttle that does not exist: %d, want 404", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM throttles`); n != 0 {
			t.Fatalf("refused requests left %d throttles", n)
		}
	})
}

func TestThrottleConsole(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	a.letters(t, 1, "billing.charge")
	// The group's page offers the throttle beside the pause.
	_, doc := a.page(t, a.olga, "/groups")
	groupHref := doc.Find(`[data-testid="group-link"]`).First().AttrOr("href", "")
	for _, path := range []string{groupHref, "/dead-letters?task=billing.charge", "/jobs?task=billing.charge"} {
		if _, d := a.page(t, a.olga, path); d.Find(`a[href="/throttles/new?task=billing.charge"]`).Length() != 1 {
			t.Errorf("%s offers no throttle of its task", path)
		}
	}
	if _, d := a.page(t, a.vic, groupHref); d.Find(`[data-testid="throttle-task-link"]`).Length() != 0 {
		t.Error("a viewer is offered the throttle link")
	}
	rec, doc := a.page(t, a.olga, "/throttles/new?task=billing.charge")
	if rec.Code != http.StatusOK {
		t.Fatalf("form: %d", rec.Code)
	}
	// No limit: the form again, the problem named, nothing throttled.
	rec = a.submit(t, a.olga, doc, `[data-testid="throttle-form"]`, url.Values{"reason": {"provider slow"}})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "give a limit") {
		t.Fatalf("no limit: %d", rec.Code)
	}
	rec = a.submit(t, a.olga, doc, `[data-testid="throttle-form"]`, url.Values{"reason": {"provider slow"}, "max_running": {"lots"}})
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "is not a whole number") {
		t.Fatalf("a limit in words: %d", rec.Code)
	}
	rec = a.submit(t, a.olga, doc, `[data-testid="throttle-form"]`, url.Values{"reason": {"provider slow"}, "max_running": {"4"}, "max_per_second": {"2"}, "for": {""}, "until": {"23:59"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("throttle: %d %.500s", rec.Code, rec.Body.String())
	}
	// The banner, on another page, names it all.
	_, doc = a.page(t, a.vic, "/dead-letters")
	banner := doc.Find(`[data-testid="throttle-banner"]`)
	text := strings.Join(strings.Fields(banner.Text()), " ")
	for _, want := range []string{"billing.charge", "at most 4 running at once and 2 starts a second", "olga", "provider slow", "23:59"} {
		if !strings.Contains(text, want) {
			t.Errorf("banner %q lacks %q", text, want)
		}
	}
	if banner.Find(`[data-testid="throttle-lift"]`).Length() != 0 {
		t.Error("a viewer sees the lift button")
	}
	// Change it from the banner's link: the form comes filled in.
	_, doc = a.page(t, a.olga, "/jobs")
	href := doc.Find(`[data-testid="throttle-change"]`).AttrOr("href", "")
	_, doc = a.page(t, a.olga, href)
	if got := doc.Find(`[data-testid="throttle-max-running"]`).AttrOr("value", ""); got != "4" {
		t.Fatalf("the change form shows max_running %q, want 4", got)
	}
	rec = a.submit(t, a.olga, doc, `[data-testid="throttle-form"]`, url.Values{"max_running": {"1"}, "max_per_second": {""}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("change: %d %.500s", rec.Code, rec.Body.String())
	}
	_, doc = a.page(t, a.olga, "/pauses")
	if got := strings.Join(strings.Fields(doc.Find(`[data-testid="throttle-row-limits"]`).Text()), " "); got != "at most 1 running at once" {
		t.Errorf("the pauses page lists the throttle as %q", got)
	}
	rec = a.submit(t, a.olga, doc, `[data-testid="throttle-banner"] form`, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("lift from the banner: %d", rec.Code)
	}
	if _, doc = a.page(t, a.olga, "/jobs"); doc.Find(`[data-testid="throttle-banner"]`).Length() != 0 {
		t.Fatal("the banner outlived the lift")
	}
	_, doc = a.page(t, a.olga, "/pauses")
	if ended := doc.Find(`[data-testid="throttle-row"]`).Text(); !strings.Contains(ended, "lifted by olga") {
		t.Errorf("ended throttles: %q", strings.Join(strings.Fields(ended), " "))
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action LIKE 'throttle%'`); n != 3 {
		t.Fatalf("%d audit entries, want 3", n)
	}
}
