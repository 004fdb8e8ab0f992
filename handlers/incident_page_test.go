package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/views"
)

// incidentTasks are the tasks of the incident fixture: a payments provider
// answering 503 to both.
var incidentTasks = []string{"payments.charge", "payments.refund"}

// providerDown is task's letter n of the outage, with fresh ids; its
// request's token (a masked argument) is quoted in the message.
func providerDown(task string, n int) string {
	return fmt.Sprintf("%s for job %d: payments-provider returned 503 Service Unavailable for POST /v1/x (request_id req_%06x) with key zzsecretzz",
		task, 500+n, 0xa1b2+n)
}

// incidentLetters dead-letters charges and refunds of the outage, one of
// each task in turn, and returns their groups (one per task, as the
// grouper keys them); then one unrelated failure of a third task. The
// letters carry group ids of their own, so no template is kept: the
// incident is found by their sample messages (dlq's tests cover learned
// templates, which handlers' tests may not import).
func incidentLetters(t *testing.T, a actions, charges, refunds int) (charge, refund, alone string) {
	t.Helper()
	if err := a.store.Queue.RegisterTasks(context.Background(), incidentTasks); err != nil {
		t.Fatal(err)
	}
	charge, refund, alone = storetest.GroupID("payments.charge", "503"), storetest.GroupID("payments.refund", "503"), storetest.GroupID("reports.build")
	fail := func(task, fp string, n int) {
		storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: task, Queue: "payments", ErrorClass: "ServiceUnavailable",
			Message: providerDown(task, n), Fingerprint: fp, Kwargs: `{"token": "zzsecretzz"}`, WorkerVersion: "v3.1.0",
			FailedAt: time.Now().UTC().Add(-time.Duration(60-n) * time.Second)})
	}
	for n := range max(charges, refunds) {
		if n < charges {
			fail("payments.charge", charge, 2*n)
		}
		if n < refunds {
			fail("payments.refund", refund, 2*n+1)
		}
	}
	storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: "reports.build", ErrorClass: "ServiceUnavailable",
		Message: "report store is read-only", Fingerprint: alone})
	return charge, refund, alone
}

func TestIncidentPage(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	charge, refund, alone := incidentLetters(t, a, 18, 6)
	both := strings.Join(sortedIDs(charge, refund), ",")

	t.Run("ShowsWhatBrokeInWhichTasks", func(t *testing.T) {
		rec, doc := a.page(t, a.olga, "/incidents/"+charge)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %.300s", rec.Code, rec.Body.String())
		}
		if got := text(doc, "incident-title"); got != "ServiceUnavailable in payments.charge, payments.refund" {
			t.Errorf("title %q", got)
		}
		if got := doc.Find("title").Text(); !strings.Contains(got, "ServiceUnavailable in payments.charge, payments.refund") {
			t.Errorf("page title %q", got)
		}
		if got := text(doc, "incident-pending"); got != "24" {
			t.Errorf("pending %q, want 24", got)
		}
		rows := byTestID(doc.Selection, "incident-group")
		if rows.Length() != 2 {
			t.Fatalf("%d task rows, want 2", rows.Length())
		}
		for i, want := range []struct{ task, fp, pending string }{{"payments.charge", charge, "18"}, {"payments.refund", refund, "6"}} {
			row := rows.Eq(i)
			link := byTestID(row, "incident-group-link")
			if squash(link) != want.task || link.AttrOr("href", "") != "/groups/"+want.fp || squash(byTestID(row, "incident-group-pending")) != want.pending {
				t.Errorf("row %d: %q → %s, %s pending; want %s → /groups/%s, %s", i, squash(link), link.AttrOr("href", ""),
					squash(byTestID(row, "incident-group-pending")), want.task, want.fp, want.pending)
			}
		}
		if got := text(doc, "incident-template"); !strings.Contains(got, "payments-provider returned 503 Service Unavailable") {
			t.Errorf("template %q", got)
		}
		// The letters of both tasks, newest first, in one list.
		tasks := map[string]bool{}
		byTestID(doc.Selection, "letter-row").Each(func(_ int, r *goquery.Selection) {
			for _, task := range incidentTasks {
				if strings.Contains(r.Text(), task) {
					tasks[task] = true
				}
			}
		})
		if len(tasks) != 2 {
			t.Errorf("the letters list shows tasks %v, want both", tasks)
		}
		if strings.Contains(rec.Body.String(), "zzsecretzz") {
			t.Error("the page shows the masked token")
		}

	})

	t.Run("AViewerSeesNoReplay", func(t *testing.T) {
		_, doc := a.page(t, a.vic, "/incidents/"+charge)
		if byTestID(doc.Selection, "incident-replay").Length() != 0 || byTestID(doc.Selection, "incident-discard").Length() != 0 {
			t.Error("a viewer is offered to replay or discard")
		}
	})

	t.Run("OtherIdsLeadToTheRightPage", func(t *testing.T) {
		noRedirect := func(path string) (int, string) {
			rec, _ := a.page(t, a.vic, path)
			return rec.Code, rec.Header().Get("Location")
		}
		if code, loc := noRedirect("/incidents/" + refund); code != http.StatusFound || loc != "/incidents/"+charge {
			t.Errorf("another group of the incident: %d → %q, want 302 → /incidents/%s", code, loc, charge)
		}
		if code, loc := noRedirect("/incidents/" + alone); code != http.StatusFound || loc != "/groups/"+alone {
			t.Errorf("a group in no incident: %d → %q, want 302 → /groups/%s", code, loc, alone)
		}
		if rec, doc := a.page(t, a.vic, "/incidents/not-an-id"); rec.Code != http.StatusBadRequest || !strings.Contains(squash(doc.Selection), "16 hex digits") {
			t.Errorf("a bad id: %d %q, want 400 saying what an id is", rec.Code, squash(doc.Selection))
		}
	})

	t.Run("TheAPIListsIt", func(t *testing.T) {
		rec, body := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/incidents", "")
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		items, _ := body["items"].([]any)
		if len(items) != 1 {
			t.Fatalf("%d incidents, want 1: %s", len(items), rec.Body)
		}
		inc := items[0].(map[string]any)
		filter, _ := inc["filter"].(map[string]any)
		if inc["id"] != charge || filter["fingerprint"] != both || fmt.Sprint(inc["tasks"]) != "[payments.charge payments.refund]" ||
			num(inc["pending"]) != 24 || inc["url"] != "/incidents/"+charge {
			t.Errorf("incident %v", inc)
		}
		if strings.Contains(rec.Body.String(), "zzsecretzz") {
			t.Error("the API shows the masked token")
		}
		if rec, _ := a.api(t, "", http.MethodGet, "/api/v1/incidents", ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("without a token: %d, want 401", rec.Code)
		}
	})

	t.Run("TheGroupPageStrip", func(t *testing.T) {
		ctx := context.Background()
		s, err := handlers.IncidentOfGroup(ctx, a.store.Groups, refund, true)
		if err != nil || s == nil {
			t.Fatalf("strip of the refunds' group: %v, %v", s, err)
		}
		var buf bytes.Buffer
		if err := views.IncidentStrip(s).Render(ctx, &buf); err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		got := text(doc, "incident-strip")
		if want := "Part of an incident: the same failure in payments.charge (18 pending) · see the incident · Replay all 24…"; got != want {
			t.Errorf("strip %q\nwant  %q", got, want)
		}
		if href := byTestID(doc.Selection, "incident-strip-link").AttrOr("href", ""); href != "/incidents/"+charge {
			t.Errorf("strip links to %q", href)
		}
		if s, err := handlers.IncidentOfGroup(ctx, a.store.Groups, refund, false); err != nil || s.ReplayHref != "" {
			t.Errorf("a viewer's strip offers %q (%v)", s.ReplayHref, err)
		}
		if s, err := handlers.IncidentOfGroup(ctx, a.store.Groups, alone, true); err != nil || s != nil {
			t.Errorf("a group in no incident has a strip: %+v, %v", s, err)
		}
		// The group page shows it, under the title; a lone group's none.
		if _, page := a.page(t, a.olga, "/groups/"+refund); byTestID(page.Selection, "incident-strip-link").AttrOr("href", "") != "/incidents/"+charge {
			t.Errorf("the refunds' group page has no strip leading to the incident")
		}
		if _, page := a.page(t, a.olga, "/groups/"+alone); byTestID(page.Selection, "incident-strip").Length() != 0 {
			t.Errorf("a lone group's page has an incident strip")
		}
	})
	// Last: it replays letters. The replay of the incident is one operation
	// over both groups, safe by default as a group's replay is.
	t.Run("ReplayAllIsOneOperationOverBothTasks", func(t *testing.T) {
		_, doc := a.page(t, a.olga, "/incidents/"+charge)
		replay := byTestID(doc.Selection, "incident-replay")
		if got := squash(replay); got != "Replay all 24 letters…" {
			t.Errorf("replay button %q", got)
		}
		crec, confirm := a.page(t, a.olga, replay.AttrOr("href", ""))
		if crec.Code != http.StatusOK || text(confirm, "confirm-count") != "24" {
			t.Fatalf("confirmation: %d, count %q", crec.Code, text(confirm, "confirm-count"))
		}
		if got, want := choicesOf(confirm), (confirmChoices{canary: true, size: "10", pace: "50", guard: "20"}); got.canary != want.canary ||
			got.size != want.size || got.pace != want.pace || got.guard != want.guard {
			t.Errorf("a replay of the incident starts with %+v, want a group replay's safe defaults %+v", got, want)
		}
		var byTask []string
		confirm.Find(`[data-testid="confirm-by-task"] tbody tr`).Each(func(_ int, r *goquery.Selection) {
			var cells []string
			r.Find("td, th").Each(func(_ int, c *goquery.Selection) { cells = append(cells, squash(c)) })
			byTask = append(byTask, strings.Join(cells, " "))
		})
		if !slices.Equal(byTask, []string{"payments.charge 18", "payments.refund 6"}) {
			t.Errorf("by task %q, want both tasks", byTask)
		}
		opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"reason": {"provider back"}}))
		var filter string
		if err := a.db.Get(&filter, `SELECT array_to_string(ARRAY(SELECT jsonb_array_elements_text(filter->'fingerprints')), ',') FROM operations WHERE id = $1`, opID); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(filter, both) {
			t.Errorf("operation %d selects %q, want both groups %s", opID, filter, both)
		}
		op := a.waitOperation(t, opID, dlq.OpCanary)
		if op.Matched != 24 || op.Canary != 10 {
			t.Errorf("operation: %d matched, canary %d; want 24 and 10", op.Matched, op.Canary)
		}
		// The canary's letters are the newest ten, of both tasks.
		var canaryTasks []string
		if err := a.db.Select(&canaryTasks, `SELECT DISTINCT task FROM jobs WHERE operation_id = $1 ORDER BY 1`, opID); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(canaryTasks, incidentTasks) {
			t.Errorf("the canary replayed letters of %v, want both tasks", canaryTasks)
		}
	})
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
