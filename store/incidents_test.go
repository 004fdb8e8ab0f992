package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/storetest"
)

// incidentFixture is a store on its own database whose letters are grouped
// by the store's grouper, as a worker's are.
type incidentFixture struct {
	db    *storetest.DB
	store *storetest.Stores
}

func newIncidentFixture(t *testing.T) incidentFixture {
	t.Helper()
	db := storetest.NewDB(t)
	return incidentFixture{db: db, store: storetest.NewStores(db.DB)}
}

// fail dead-letters one letter of task, grouped through the grouper (which
// keeps its template), failed ago before now, and returns its group.
func (f incidentFixture) fail(t *testing.T, task, class, message string, ago time.Duration) string {
	t.Helper()
	fp, err := f.store.Groups.GroupLetter(context.Background(), grouping.Letter{Task: task, Class: class, Message: message})
	if err != nil {
		t.Fatal(err)
	}
	storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: task, ErrorClass: class, Message: message, Fingerprint: fp,
		FailedAt: time.Now().UTC().Add(-ago)})
	return fp
}

// outage is the demo's payments outage as task's letter n tells it: the
// task, the job and the request id are fresh in every letter.
func outage(task string, n int) string {
	return fmt.Sprintf("%s for job %d: payments-provider returned 503 Service Unavailable for POST /v1/%s (request_id req_%08x): "+
		"upstream connect error or disconnect/reset before headers", task, 1000+n, strings.ReplaceAll(task, ".", "_"), 0x3d26+n*7919)
}

func TestIncidents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("TwoTasksWithTheSameFailureAreOneIncident", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		var charge, refund string
		for i := range 4 {
			charge = f.fail(t, "payments.charge", "ServiceUnavailable", outage("payments.charge", i), time.Duration(20-i)*time.Minute)
		}
		for i := range 2 {
			refund = f.fail(t, "payments.refund", "ServiceUnavailable", outage("payments.refund", i), time.Duration(10-i)*time.Minute)
		}
		if charge == refund {
			t.Fatalf("both tasks in group %s: the grouper keys groups by task", charge)
		}
		// Another failure of the refunds, alone in its task: no incident.
		f.fail(t, "payments.refund", "ValidationError", "amount must be positive", time.Minute)

		incs, err := f.store.Groups.Incidents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(incs) != 1 {
			t.Fatalf("%d incidents, want 1: %+v", len(incs), incs)
		}
		inc := incs[0]
		if inc.ID != charge {
			t.Errorf("incident id %s, want the oldest group's, %s", inc.ID, charge)
		}
		if got := inc.Tasks(); !slices.Equal(got, []string{"payments.charge", "payments.refund"}) {
			t.Errorf("tasks %v", got)
		}
		if got, want := inc.GroupIDs(), sorted(charge, refund); !slices.Equal(got, want) {
			t.Errorf("groups %v, want %v", got, want)
		}
		if inc.ErrorClass != "ServiceUnavailable" || inc.Pending != 6 || inc.Total != 6 || inc.LastHour != 6 {
			t.Errorf("class %q, pending %d, total %d, last hour %d; want ServiceUnavailable, 6, 6, 6", inc.ErrorClass, inc.Pending, inc.Total, inc.LastHour)
		}
		if inc.Groups[0].Task != "payments.charge" || inc.Groups[0].Pending != 4 {
			t.Errorf("first group %s with %d pending, want the charges' 4", inc.Groups[0].Task, inc.Groups[0].Pending)
		}
		if !strings.Contains(inc.Template, "payments-provider returned 503 Service Unavailable") || strings.Contains(inc.Template, "payments.charge") {
			t.Errorf("template %q, want the shared words without the task's name", inc.Template)
		}
		if age := time.Since(inc.FirstSeen); age < 19*time.Minute || age > 21*time.Minute {
			t.Errorf("first seen %s ago, want the first charge's 20 minutes", age)
		}

		// Each group leads to it; a group of no incident does not.
		for _, id := range []string{charge, refund} {
			got, ok, err := f.store.Groups.IncidentOf(ctx, id)
			if err != nil || !ok || got.ID != charge {
				t.Errorf("IncidentOf(%s) = %s, %v, %v; want incident %s", id, got.ID, ok, err, charge)
			}
		}
		var alone string
		if err := f.db.Get(&alone, `SELECT fingerprint FROM error_groups WHERE error_class = 'ValidationError'`); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := f.store.Groups.IncidentOf(ctx, alone); ok || err != nil {
			t.Errorf("IncidentOf(a group alone) = %v, %v; want none", ok, err)
		}
		if _, ok, err := f.store.Groups.IncidentOf(ctx, "ffffffffffffffff"); ok || err != nil {
			t.Errorf("IncidentOf(no group) = %v, %v; want none", ok, err)
		}
	})

	t.Run("SameClassAnotherTemplateIsNone", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		for i := range 3 {
			f.fail(t, "payments.charge", "HTTPError", fmt.Sprintf("503 Server Error: Service Unavailable for url: https://api.example.com/v1/charges/ch_%d", i), time.Minute)
			f.fail(t, "payments.refund", "HTTPError", fmt.Sprintf("404 Client Error: Not Found for url: https://api.example.com/v1/refunds/re_%d", i), time.Minute)
		}
		if incs := incidents(t, f.store); len(incs) != 0 {
			t.Errorf("%d incidents, want none: %+v", len(incs), incs)
		}
	})

	t.Run("FreshIdsInEveryLetterStillMakeOne", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		// Three tasks, Stripe-style ids that change with every letter.
		for i := range 5 {
			for _, task := range []string{"billing.invoice", "billing.renew", "billing.upgrade"} {
				f.fail(t, task, "CardError", fmt.Sprintf("Your card was declined (request req_%dAbC%d, customer cus_Q%dz, charge ch_3P%dxY)",
					i*31, i, i*7+len(task), i*13), time.Duration(i)*time.Minute)
			}
		}
		incs := incidents(t, f.store)
		if len(incs) != 1 || len(incs[0].Tasks()) != 3 || incs[0].Pending != 15 {
			t.Fatalf("incidents %+v, want one of 3 tasks and 15 letters", incs)
		}
	})

	t.Run("GroupsWithoutAKeptTemplateCompareTheirSamples", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		// Letters written with group ids of their own, as a bulk load or
		// an older version did: no template is kept for them.
		for i, task := range []string{"payments.charge", "payments.refund"} {
			storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: task, ErrorClass: "ServiceUnavailable",
				Message: outage(task, i), Fingerprint: storetest.GroupID(task)})
		}
		incs := incidents(t, f.store)
		if len(incs) != 1 || len(incs[0].Groups) != 2 {
			t.Fatalf("incidents %+v, want one of both groups", incs)
		}
	})

	t.Run("OneTaskIsNoIncident", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		// The same failure at two places of one task: two groups, which
		// only the grouper (or an operator's merge) may join.
		for _, fp := range []string{storetest.GroupID("a"), storetest.GroupID("b")} {
			storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: "payments.charge", ErrorClass: "ServiceUnavailable",
				Message: outage("payments.charge", 1), Fingerprint: fp})
		}
		if incs := incidents(t, f.store); len(incs) != 0 {
			t.Errorf("%d incidents, want none: %+v", len(incs), incs)
		}
	})

	t.Run("ASettledOldGroupIsNotLive", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		f.fail(t, "payments.charge", "ServiceUnavailable", outage("payments.charge", 1), time.Minute)
		refund := f.fail(t, "payments.refund", "ServiceUnavailable", outage("payments.refund", 1), 3*time.Hour)
		storetest.Settle(t, f.db.DB, storetest.Outcome{Status: "discarded"}, "fingerprint = $1", refund)
		if incs := incidents(t, f.store); len(incs) != 0 {
			t.Errorf("%d incidents, want none (the refunds were settled 3 hours ago): %+v", len(incs), incs)
		}
		// A letter of the last hour makes it live again, even with
		// nothing pending.
		late := f.fail(t, "payments.refund", "ServiceUnavailable", outage("payments.refund", 2), 10*time.Minute)
		storetest.Settle(t, f.db.DB, storetest.Outcome{Status: "replayed"}, "fingerprint = $1", late)
		if incs := incidents(t, f.store); len(incs) != 1 {
			t.Errorf("%d incidents, want 1 (a refund failed 10 minutes ago)", len(incs))
		}
	})

	t.Run("MergedGroupsNeverAppear", func(t *testing.T) {
		t.Parallel()
		f := newIncidentFixture(t)
		charge := f.fail(t, "payments.charge", "ServiceUnavailable", outage("payments.charge", 1), 5*time.Minute)
		refund := f.fail(t, "payments.refund", "ServiceUnavailable", outage("payments.refund", 1), 4*time.Minute)
		stray := storetest.GroupID("refund", "stray")
		storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: "payments.refund", ErrorClass: "ServiceUnavailable",
			Message: outage("payments.refund", 2), Fingerprint: stray})
		if err := f.store.Groups.MergeGroupsUnchecked(ctx, []string{stray}, refund, dlq.Actor{Name: "priya"}, "one outage"); err != nil {
			t.Fatal(err)
		}
		// A worker that has not heard of the merge files one more letter
		// under the merged id: its summary row is back until the sweep.
		storetest.InsertDeadLetter(t, f.db.DB, storetest.Letter{Task: "payments.refund", ErrorClass: "ServiceUnavailable",
			Message: outage("payments.refund", 3), Fingerprint: stray})
		incs := incidents(t, f.store)
		if len(incs) != 1 {
			t.Fatalf("%d incidents, want 1: %+v", len(incs), incs)
		}
		if got, want := incs[0].GroupIDs(), sorted(charge, refund); !slices.Equal(got, want) {
			t.Errorf("groups %v, want %v without the merged %s", got, want, stray)
		}
		// The merged id leads to the incident of the group it went into.
		if got, ok, err := f.store.Groups.IncidentOf(ctx, stray); err != nil || !ok || got.ID != charge {
			t.Errorf("IncidentOf(merged %s) = %s, %v, %v; want %s", stray, got.ID, ok, err, charge)
		}
	})
}

func incidents(t *testing.T, store *storetest.Stores) []dlq.Incident {
	t.Helper()
	incs, err := store.Groups.Incidents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return incs
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}
