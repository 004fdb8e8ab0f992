package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

func carrierLetter(carrier string) string {
	return "shipment rejected by carrier " + carrier + ": address not verified"
}

// file dead-letters a job of task that failed with msg, as a worker does
// (grouped by the store's grouper, filed under the group its id means
// now), and returns the letter's group.
func (a actions) file(t *testing.T, task, msg string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := a.store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: task, Queue: "edit", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	jobs, err := a.store.Queue.Claim(ctx, "w1", []string{"edit"}, 1, time.Minute)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claimed %d jobs: %v", len(jobs), err)
	}
	res, err := a.store.Queue.DeadLetterMany(ctx, "w1", []dlq.DeadOutcome{{Lease: dlq.LeaseOf("w1", jobs[0]), Task: task,
		Reason: dlq.ReasonPermanent, Attempt: dlq.Attempt{Attempt: 1, At: time.Now(), Class: "CarrierError", Message: msg, Outcome: dlq.OutcomeDead}}})
	if err != nil || len(res) != 1 {
		t.Fatalf("dead-lettered %v: %v", res, err)
	}
	var fp string
	if err := a.db.Get(&fp, `SELECT fingerprint FROM dead_letter_records WHERE id = $1`, res[0].LetterID); err != nil {
		t.Fatal(err)
	}
	return fp
}

func TestGroupEditPage(t *testing.T) {
	t.Parallel()

	t.Run("MergeThenSplitOffFromThePage", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		dhl, ups := a.file(t, "billing.charge", carrierLetter("dhl")), a.file(t, "billing.charge", carrierLetter("ups"))
		a.file(t, "billing.charge", carrierLetter("dhl"))
		rec, doc := a.page(t, a.olga, "/groups/"+ups+"/edit")
		if rec.Code != http.StatusOK {
			t.Fatalf("edit page: %d %.300s", rec.Code, rec.Body.String())
		}
		row := doc.Find(`[data-testid="merge-row"][data-fingerprint="` + dhl + `"]`)
		if row.Length() != 1 || !strings.Contains(row.Text(), "carrier dhl") || !strings.Contains(row.Text(), "older") {
			t.Fatalf("the merge table does not list %s as the older group: %q", dhl, doc.Find(`[data-testid="merge-table"]`).Text())
		}
		// No reason: the page again, the ticked group still ticked.
		rec = a.submit(t, a.olga, doc, `[data-testid="merge-form"]`, url.Values{"groups": {dhl}})
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("merge without a reason: %d", rec.Code)
		}
		again := parseHTML(t, rec)
		if again.Find(`[data-testid="reason-problem"]`).Length() != 1 || again.Find(`[data-testid="merge-check"][checked]`).Length() != 1 {
			t.Fatalf("the refused form does not say why or lost its ticks: %q", again.Find(`[data-testid="merge-panel"]`).Text())
		}
		rec = a.submit(t, a.olga, doc, `[data-testid="merge-form"]`, url.Values{"groups": {dhl}, "reason": {"one outage"}})
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/groups/"+dhl+"/edit?") {
			t.Fatalf("merge: %d to %q, want a 303 to the older group's page", rec.Code, rec.Header().Get("Location"))
		}
		// The merged id leads to the survivor's page.
		if rec, _ := a.page(t, a.olga, "/groups/"+ups+"/edit"); rec.Code != http.StatusFound || rec.Header().Get("Location") != "/groups/"+dhl+"/edit" {
			t.Errorf("the merged group's page: %d to %q", rec.Code, rec.Header().Get("Location"))
		}
		_, doc = a.page(t, a.olga, "/groups/"+dhl+"/edit?done=merged&n=1")
		if flash := doc.Find(".alert").Text(); !strings.Contains(flash, "Merged 1 group into this one") {
			t.Errorf("flash %q", flash)
		}
		if got := doc.Find(`[data-testid="template-variable"]`); got.Length() != 1 || !strings.HasPrefix(got.Text(), "<*>") ||
			!strings.Contains(doc.Find(`[data-testid="edit-template"]`).Text(), "carrier") {
			t.Errorf("template %q, want the carrier a variable", doc.Find(`[data-testid="edit-template"]`).Text())
		}
		if doc.Find(`[data-testid="unmerge-row"][data-fingerprint="`+ups+`"]`).Length() != 1 {
			t.Fatalf("the merged group is not offered to split off: %q", doc.Find("main").Text())
		}
		rec = a.submit(t, a.olga, doc, `[data-testid="unmerge-form"]`, url.Values{"reason": {"two outages"}})
		if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/groups/"+ups+"/edit?") {
			t.Fatalf("split off: %d to %q", rec.Code, rec.Header().Get("Location"))
		}
		if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action IN ('group_merge', 'group_unmerge') AND actor = 'olga'`); n != 2 {
			t.Errorf("%d audit entries by olga, want a merge and an unmerge", n)
		}
	})

	t.Run("SplitFromThePage", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		var group string
		for _, c := range []string{"dhl", "ups", "fedex", "dhl", "dhl"} {
			group = a.file(t, "billing.charge", carrierLetter(c))
		}
		_, doc := a.page(t, a.olga, "/groups/"+group+"/edit")
		words := doc.Find(`[data-testid="split-variable"] [data-testid="split-word"]`)
		if words.Length() != 3 || !strings.Contains(words.First().Text(), "dhl") || !strings.Contains(words.First().Text(), "keeps this group") {
			t.Fatalf("split words %q, want dhl keeping the group first, then two more", words.Text())
		}
		rec := a.submit(t, a.olga, doc, `[data-testid="split-form"]`, url.Values{"reason": {"three carriers"}})
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("split: %d %.300s", rec.Code, rec.Body.String())
		}
		_, doc = a.page(t, a.olga, rec.Header().Get("Location"))
		if flash := doc.Find(".alert").Text(); !strings.Contains(flash, "Split this group in 3") {
			t.Errorf("flash %q", flash)
		}
		if got := doc.Find(`[data-testid="split-standing"] li`).Length(); got != 3 {
			t.Errorf("%d standing parts listed, want 3: %q", got, doc.Find(`[data-testid="split-panel"]`).Text())
		}
		if got := doc.Find(`[data-testid="merge-row"]`).Length(); got != 2 {
			t.Errorf("%d groups to merge back with, want the 2 parts", got)
		}
	})

	t.Run("ViewerSeesNoFormAndCannotPost", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		dhl, ups := a.file(t, "billing.charge", carrierLetter("dhl")), a.file(t, "billing.charge", carrierLetter("ups"))
		rec, doc := a.page(t, a.vic, "/groups/"+dhl+"/edit")
		if rec.Code != http.StatusOK || doc.Find("form[data-testid]").Length() != 0 || doc.Find(`[data-testid="edit-no-act"]`).Length() != 1 {
			t.Fatalf("viewer's page: %d, %d forms", rec.Code, doc.Find("form[data-testid]").Length())
		}
		for _, path := range []string{"/merge", "/split", "/unmerge"} {
			if rec := a.post(t, a.vic, "/groups/"+dhl+path, url.Values{"groups": {ups}, "reason": {"r"}, "position": {"4"}, "group": {ups}}); rec.Code != http.StatusForbidden {
				t.Errorf("viewer POST %s: %d, want 403", path, rec.Code)
			}
		}
		if rec, _ := a.page(t, a.vic, "/groups/0123456789abcdef/edit"); rec.Code != http.StatusNotFound {
			t.Errorf("unknown group's page: %d, want 404", rec.Code)
		}
	})
}

// TestGroupEditAPIErrors: each bad request is a 4xx whose JSON says what
// is wrong, and changes nothing.
func TestGroupEditAPIErrors(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	dhl, ups := a.file(t, "billing.charge", carrierLetter("dhl")), a.file(t, "billing.charge", carrierLetter("ups"))
	other := a.file(t, "email.send", carrierLetter("dhl"))
	var group string
	for _, c := range []string{"dhl", "ups", "fedex"} {
		group = a.file(t, "reports.build", carrierLetter(c))
	}
	if _, err := a.store.Groups.SweepMergedGroups(context.Background()); err != nil {
		t.Fatal(err)
	}
	tpl, err := a.store.Groups.GroupTemplate(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	pos := slices.Index(tpl.Tokens, "<*>")
	for _, c := range []struct {
		name, token, path, body string
		status                  int
		code, field             string
	}{
		{"UnknownGroup", a.olgaAPI, "/api/v1/groups/0123456789abcdef/merge", `{"groups": ["` + ups + `"], "reason": "r"}`, 404, "not_found", ""},
		{"UnknownGroupInBody", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": ["0123456789abcdef"], "reason": "r"}`, 400, "invalid", "groups"},
		{"DifferentTask", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": ["` + other + `"], "reason": "r"}`, 400, "invalid", "groups"},
		{"IntoItself", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": ["` + dhl + `"], "reason": "r"}`, 400, "invalid", "groups"},
		{"NoReason", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": ["` + ups + `"]}`, 400, "invalid", "reason"},
		{"BlankReason", a.olgaAPI, "/api/v1/groups/" + group + "/split", fmt.Sprintf(`{"position": %d, "reason": "  "}`, pos), 400, "invalid", "reason"},
		{"NotAVariable", a.olgaAPI, "/api/v1/groups/" + group + "/split", `{"position": 0, "reason": "r"}`, 400, "invalid", "position"},
		{"NoPosition", a.olgaAPI, "/api/v1/groups/" + group + "/split", `{"reason": "r"}`, 400, "invalid", "position"},
		{"OutOfTheTemplate", a.olgaAPI, "/api/v1/groups/" + group + "/split", `{"position": 40, "reason": "r"}`, 400, "invalid", "position"},
		{"NotMergedHere", a.olgaAPI, "/api/v1/groups/" + dhl + "/unmerge", `{"group": "` + ups + `", "reason": "r"}`, 400, "invalid", "group"},
		{"UnknownField", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"group": "` + ups + `", "reason": "r"}`, 400, "invalid", "group"},
		{"Malformed", a.olgaAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": [`, 400, "malformed_json", ""},
		{"Viewer", a.vicAPI, "/api/v1/groups/" + dhl + "/merge", `{"groups": ["` + ups + `"], "reason": "r"}`, 403, "forbidden", ""},
	} {
		rec, body := a.api(t, c.token, http.MethodPost, c.path, c.body)
		e, _ := body["error"].(map[string]any)
		fields, _ := e["fields"].(map[string]any)
		if rec.Code != c.status || e["code"] != c.code || e["message"] == "" || c.field != "" && fields[c.field] == nil {
			t.Errorf("%s: %d %v; want %d %s on %q", c.name, rec.Code, body, c.status, c.code, c.field)
		}
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action LIKE 'group_%' AND actor <> 'system'`); n != 0 {
		t.Errorf("%d group changes audited after refusals", n)
	}
}
