package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// A viewer reads everything and changes nothing: every action route, page
// and API, answers 403, and the database is as it was.
func TestViewerMayNotAct(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := a.letters(t, 3, "billing.charge")
	storetest.Settle(t, a.db, storetest.Outcome{Status: "discarded", By: "olga", Reason: "x"}, "id = $1", ids[2])
	op, err := a.store.Operations.CreateOperation(context.Background(), dlq.OperationParams{Kind: dlq.OpReplay, Actor: dlq.Actor{Name: "olga"},
		Selection: dlq.Selection{IDs: ids[:1]}, Canary: 1, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	a.waitOperation(t, op.ID, dlq.OpCanary)
	snapshot := func() string {
		var s string
		err := a.db.Get(&s, `SELECT (SELECT count(*) FROM jobs) || '/' || (SELECT string_agg(status, ',' ORDER BY id) FROM dead_letters)
			|| '/' || (SELECT string_agg(state, ',') FROM operations) || '/' || (SELECT count(*) FROM audit_events WHERE actor <> 'webtest' AND action NOT LIKE 'sign_in%')`)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := snapshot()

	form := url.Values{"reason": {"because"}, "key": {"k1"}, "action": {"replay"}, "id": {fmt.Sprint(ids[1])},
		"max_id": {fmt.Sprint(ids[1])}, "expected": {"1"}}
	pages := []string{
		fmt.Sprintf("/dead-letters/%d/replay", ids[1]),
		fmt.Sprintf("/dead-letters/%d/discard", ids[1]),
		fmt.Sprintf("/dead-letters/%d/restore", ids[2]),
		"/dead-letters/bulk",
		"/dead-letters/bulk/confirm",
		fmt.Sprintf("/operations/%d/cancel", op.ID),
		fmt.Sprintf("/operations/%d/release", op.ID),
	}
	for _, p := range pages {
		req := httptest.NewRequest(http.MethodPost, p, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if rec := a.vic.Do(a.h, req); rec.Code != http.StatusForbidden {
			t.Errorf("POST %s as a viewer: %d, want 403", p, rec.Code)
		}
	}
	// The confirmation page is a GET, but it is the first step of an action.
	if rec, _ := a.page(t, a.vic, fmt.Sprintf("/dead-letters/bulk?action=replay&id=%d", ids[1])); rec.Code != http.StatusForbidden {
		t.Errorf("GET the confirmation as a viewer: %d, want 403", rec.Code)
	}
	apis := []struct{ path, body string }{
		{fmt.Sprintf("/api/v1/dead-letters/%d/replay", ids[1]), ``},
		{fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[1]), `{"reason": "x"}`},
		{fmt.Sprintf("/api/v1/dead-letters/%d/restore", ids[2]), ``},
		{"/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d]}`, ids[1])},
		{"/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d], "dry_run": true}`, ids[1])},
		{"/api/v1/dead-letters/discard", `{"filter": {}, "reason": "x"}`},
		{fmt.Sprintf("/api/v1/operations/%d/cancel", op.ID), ``},
		{fmt.Sprintf("/api/v1/operations/%d/release", op.ID), ``},
	}
	for _, c := range apis {
		if rec, body := a.api(t, a.vicAPI, http.MethodPost, c.path, c.body); rec.Code != http.StatusForbidden {
			t.Errorf("POST %s as a viewer: %d %v, want 403", c.path, rec.Code, body)
		}
	}
	if after := snapshot(); after != before {
		t.Fatalf("a viewer changed something: %s → %s", before, after)
	}

	// The pages offer a viewer nothing to press, and say why.
	_, doc := a.page(t, a.vic, fmt.Sprintf("/dead-letters/%d", ids[1]))
	if doc.Find(`[data-testid="actions"] form`).Length() != 0 || !strings.Contains(text(doc, "no-act-note"), "viewer role") {
		t.Fatalf("letter page for a viewer: %q", text(doc, "actions"))
	}
	_, doc = a.page(t, a.vic, "/dead-letters")
	if doc.Find(`[data-testid="bulk-replay"]`).Length() != 0 {
		t.Fatal("the list offers a viewer bulk replay")
	}
	_, doc = a.page(t, a.vic, fmt.Sprintf("/operations/%d", op.ID))
	if doc.Find(`[data-testid="cancel"]`).Length() != 0 {
		t.Fatal("the operation page offers a viewer cancel")
	}
}
