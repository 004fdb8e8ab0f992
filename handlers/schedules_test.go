package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// registerReport registers the schedule "billing.report", first due a
// minute ago, and enqueues that occurrence; the job then dies, so the page
// has a run to show and a dead letter to link.
func registerReport(t *testing.T, a actions) (jobID, letterID int64) {
	t.Helper()
	ctx := context.Background()
	at := time.Now().Add(-time.Minute).Truncate(time.Second)
	if _, err := a.store.Queue.RegisterSchedules(ctx, []dlq.ScheduleDefinition{{Name: "billing.report", Every: time.Hour,
		Timezone: "UTC", Task: "billing.charge", Queue: "default", Args: []byte(`[]`), Kwargs: []byte(`{}`), MaxAttempts: 1, NextRunAt: at}}); err != nil {
		t.Fatal(err)
	}
	o, err := a.store.Queue.EnqueueOccurrence(ctx, "billing.report", at, at.Add(time.Hour))
	if err != nil || o.JobID == 0 {
		t.Fatalf("enqueue the occurrence: %+v %v", o, err)
	}
	letterID = storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{JobID: o.JobID, Task: "billing.charge"})
	a.db.MustExec(`UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = $1`, o.JobID)
	return o.JobID, letterID
}

func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	_, letterID := registerReport(t, a)

	rec, doc := a.page(t, a.vic, "/schedules")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /schedules as viewer: %d", rec.Code)
	}
	row := doc.Find(`[data-testid="schedule-row"][data-schedule="billing.report"]`)
	if row.Length() != 1 || !strings.Contains(row.Find(`[data-testid="schedule-when"]`).Text(), "every 1h0m0s") {
		t.Fatalf("the schedule's row: %q", row.Text())
	}
	if href := row.Find(`[data-testid="schedule-letter"]`).AttrOr("href", ""); href != "/dead-letters/"+strconv.FormatInt(letterID, 10) {
		t.Errorf("dead letter link %q, want the letter %d", href, letterID)
	}
	if got := row.Find(`[data-testid="schedule-last"] [data-testid="schedule-run"]`).Text(); got != "dead" {
		t.Errorf("last run %q, want dead", got)
	}
	if doc.Find(`[data-testid="schedule-form"]`).Length() != 0 {
		t.Error("a viewer is offered the disable form")
	}
	if doc.Find(`nav a[href="/schedules"]`).Length() != 1 {
		t.Error("the navigation does not link the schedules page")
	}
	if rec := a.post(t, a.vic, "/schedules/billing.report/disable", url.Values{"reason": {"r"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("viewer disable: %d", rec.Code)
	}

	// The operator's form: without a reason the page comes back with the
	// problem under the form and nothing changed; with one, 303.
	_, doc = a.page(t, a.olga, "/schedules")
	form := doc.Find(`[data-testid="schedule-form"]`)
	rec = a.post(t, a.olga, "/schedules/billing.report/disable", formValues(form, url.Values{"reason": {" "}}))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "say why") {
		t.Fatalf("disable without a reason: %d", rec.Code)
	}
	rec = a.post(t, a.olga, "/schedules/billing.report/disable", formValues(form, url.Values{"reason": {"bills twice"}}))
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/schedules?done=disabled") {
		t.Fatalf("disable: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	_, doc = a.page(t, a.olga, rec.Header().Get("Location"))
	row = doc.Find(`[data-testid="schedule-row"][data-schedule="billing.report"]`)
	if row.Find(`[data-testid="schedule-state"]`).Text() != "disabled" || !strings.Contains(row.Find(`[data-testid="schedule-change"]`).Text(), "bills twice") ||
		row.Find(`[data-testid="schedule-enable"]`).Length() != 1 {
		t.Errorf("after disabling, the row reads %q", row.Text())
	}
	// Disabling again (a stale tab): 409 saying who disabled it.
	rec = a.post(t, a.olga, "/schedules/billing.report/disable", formValues(form, url.Values{"reason": {"again"}, "key": {"another"}}))
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "already disabled") {
		t.Errorf("second disable: %d", rec.Code)
	}
	if rec := a.post(t, a.olga, "/schedules/nope/enable", formValues(form, url.Values{"reason": {"r"}, "key": {"yet-another"}})); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown schedule: %d, want 404", rec.Code)
	}
	if n := a.count(t, `SELECT count(*) FROM audit_events WHERE action = $1`, dlq.ActionScheduleDisable); n != 1 {
		t.Errorf("%d audit entries of disabling, want 1", n)
	}
}
