package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

// TestAuditHideSignIns: the audit list's "Hide sign-ins" box leaves out the
// sign-in entries, stays ticked and in every link of the page (older
// entries, exports), and the API takes the same parameter.
func TestAuditHideSignIns(t *testing.T) {
	t.Parallel()
	a := newActions(t) // olga and vic signed in: two sign_in entries
	ids := a.letters(t, 3, "billing.charge")
	for _, id := range ids {
		a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason": "dup"}`)
	}
	actions := func(doc *goquery.Document) []string {
		var out []string
		doc.Find(`[data-testid="audit-entry"]`).Each(func(_ int, s *goquery.Selection) { out = append(out, s.AttrOr("data-action", "")) })
		return out
	}

	_, doc := a.page(t, a.vic, "/audit")
	if got := strings.Join(actions(doc), ","); !strings.Contains(got, "sign_in") {
		t.Fatalf("the whole trail has no sign-in to hide: %s", got)
	}
	if _, checked := byTestID(doc.Selection, "audit-hide-sign-ins").Attr("checked"); checked {
		t.Error("the box is ticked without being asked")
	}

	rec, doc := a.page(t, a.vic, "/audit?hide_sign_ins=1&limit=2")
	if rec.Code != http.StatusOK {
		t.Fatalf("%d", rec.Code)
	}
	if got := strings.Join(actions(doc), ","); got != "discard,discard" {
		t.Errorf("hiding sign-ins, the first page: %s", got)
	}
	if _, checked := byTestID(doc.Selection, "audit-hide-sign-ins").Attr("checked"); !checked {
		t.Error("the box is not ticked on the page it filtered")
	}
	for _, link := range []string{"audit-next", "audit-export-csv", "audit-export-json"} {
		if href := byTestID(doc.Selection, link).AttrOr("href", ""); !strings.Contains(href, "hide_sign_ins=1") {
			t.Errorf("%s forgets the filter: %q", link, href)
		}
	}
	_, older := a.page(t, a.vic, byTestID(doc.Selection, "audit-next").AttrOr("href", ""))
	if got := strings.Join(actions(older), ","); !strings.HasPrefix(got, "discard,") || strings.Contains(got, "sign_in") {
		t.Errorf("hiding sign-ins, the older page: %s", got)
	}

	_, all := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit", "")
	_, body := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit?hide_sign_ins=1", "")
	signIns := 0
	for _, item := range all["items"].([]any) {
		if act := item.(map[string]any)["action"]; act == "sign_in" {
			signIns++
		}
	}
	for _, item := range body["items"].([]any) {
		if act := item.(map[string]any)["action"]; act == "sign_in" || act == "sign_in_failed" {
			t.Errorf("the API's list hides no sign-in: %v", item)
		}
	}
	if n, want := len(body["items"].([]any)), len(all["items"].([]any))-signIns; signIns != 2 || n != want {
		t.Errorf("the API without sign-ins: %d entries, want %d (all but the %d sign-ins)", n, want, signIns)
	}
	if rec, _ := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit?hide_sign_ins=maybe", ""); rec.Code != http.StatusBadRequest {
		t.Errorf("hide_sign_ins=maybe: %d, want 400", rec.Code)
	}
	if rec, doc := a.page(t, a.vic, "/audit?hide_sign_ins=maybe"); rec.Code != http.StatusBadRequest ||
		!strings.Contains(squash(byTestID(doc.Selection, "filter-error")), "Hide sign-ins") {
		t.Errorf("hide_sign_ins=maybe on the page: %d", rec.Code)
	}
}
