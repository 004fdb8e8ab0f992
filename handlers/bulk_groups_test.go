package handlers_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Error groups of the fixtures of this file: group ids are 16 hex digits.
const (
	groupCharge = "00000000000000c1" // 21 pending letters of billing.charge
	groupRefund = "00000000000000c2" // 20 pending letters of email.send, and one replayed
	groupReport = "00000000000000c3" // 25 pending letters of reports.build
)

// groupLetters inserts the file's three groups and returns the ids of
// each group's pending letters.
func groupLetters(t *testing.T, a actions) map[string][]int64 {
	t.Helper()
	ids := map[string][]int64{}
	for _, g := range []struct {
		fp, task, version string
		n                 int
	}{{groupCharge, "billing.charge", "v2.0.0", 21}, {groupRefund, "email.send", "v2.0.0", 20}, {groupReport, "reports.build", "v1.9.9", 25}} {
		for i := range g.n {
			ids[g.fp] = append(ids[g.fp], storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: g.task, Fingerprint: g.fp,
				WorkerVersion: g.version, FailedAt: time.Now().Add(-time.Duration(i) * time.Minute)}))
		}
	}
	storetest.InsertDeadLetter(t, a.db.DB, storetest.Letter{Task: "email.send", Fingerprint: groupRefund, Status: "replayed"})
	return ids
}

// confirmChoices are the replay options a confirmation page starts with.
type confirmChoices struct {
	canary       bool
	size, pace   string
	guard, warns string
}

func choicesOf(doc *goquery.Document) confirmChoices {
	_, canary := byTestID(doc.Selection, "confirm-canary").Attr("checked")
	return confirmChoices{canary: canary,
		size:  byTestID(doc.Selection, "confirm-canary-size").AttrOr("value", ""),
		pace:  byTestID(doc.Selection, "confirm-rate").AttrOr("value", ""),
		guard: byTestID(doc.Selection, "confirm-died-again").AttrOr("value", ""),
		warns: squash(byTestID(doc.Selection, "version-warning"))}
}

// TestGroupReplayIsSafeByDefault: "Replay this group" of a group of more
// than 20 pending letters starts with a canary of 10, a pace of 50 a
// second and the died-again guard at 20%, as a replay of more than 1,000
// letters does; it warns when live workers still run the build the
// group's newest letters failed on; and each choice can still be cleared.
func TestGroupReplayIsSafeByDefault(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := groupLetters(t, a)
	safe := confirmChoices{canary: true, size: "10", pace: "50", guard: "20"}
	confirm := func(t *testing.T, action, filter string) *goquery.Document {
		t.Helper()
		q := url.Values{"action": {action}, "all_matching": {"1"}, "filter": {filter}}
		rec, doc := a.page(t, a.olga, "/dead-letters/bulk?"+q.Encode())
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation of %s: %d %.300s", filter, rec.Code, rec.Body.String())
		}
		return doc
	}

	t.Run("FromTheGroupPage", func(t *testing.T) {
		_, group := a.page(t, a.olga, "/groups/"+groupCharge)
		href := byTestID(group.Selection, "group-replay").AttrOr("href", "")
		rec, doc := a.page(t, a.olga, href)
		if rec.Code != http.StatusOK || text(doc, "confirm-count") != "21" {
			t.Fatalf("replay this group %q: %d, count %q", href, rec.Code, text(doc, "confirm-count"))
		}
		if got := choicesOf(doc); got != safe {
			t.Errorf("a group of 21: %+v, want %+v", got, safe)
		}
		// The guard is set, and the page says it cannot act on so few.
		if got := text(doc, "confirm-guard-never-judges"); !strings.Contains(got, "With 21 letters the guard never judges") {
			t.Errorf("guard note %q", got)
		}
	})
	for _, c := range []struct {
		name, action, filter string
		want                 confirmChoices
	}{
		{"TwoGroups", "replay", "fingerprint=" + groupRefund + "," + groupReport, safe},
		{"GroupOfTwenty", "replay", "fingerprint=" + groupRefund, confirmChoices{size: "5"}},
		{"NoGroupBelowAThousand", "replay", "task=reports.build", confirmChoices{size: "5"}},
		{"Discard", "discard", "fingerprint=" + groupCharge, confirmChoices{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := choicesOf(confirm(t, c.action, c.filter)); got != c.want {
				t.Errorf("%s of %s: %+v, want %+v", c.action, c.filter, got, c.want)
			}
		})
	}

	t.Run("WarnsWhileLiveWorkersRunTheFailingBuild", func(t *testing.T) {
		ctx := context.Background()
		if err := a.store.Queue.RegisterWorker(ctx, dlq.WorkerInfo{ID: "w-old", Host: "h1", PID: 1, Version: "v2.0.0",
			Queues: []string{"default"}, Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		// A worker silent for five minutes is not live: its build says nothing.
		a.db.MustExec(`UPDATE workers SET heartbeat_at = now() - interval '5 minutes' WHERE id = 'w-old'`)
		if got := choicesOf(confirm(t, "replay", "fingerprint="+groupCharge)).warns; got != "" {
			t.Errorf("only a stale worker runs v2.0.0, yet %q", got)
		}
		a.db.MustExec(`UPDATE workers SET heartbeat_at = now() WHERE id = 'w-old'`)
		got := choicesOf(confirm(t, "replay", "fingerprint="+groupCharge)).warns
		if !strings.Contains(got, "Before you replay") || !strings.Contains(got, "v2.0.0") || !strings.Contains(got, "likely fail") {
			t.Errorf("warning %q, want one naming v2.0.0", got)
		}
		if got := choicesOf(confirm(t, "replay", "fingerprint="+groupReport)).warns; got != "" {
			t.Errorf("the reports group failed on v1.9.9, which no worker runs, yet %q", got)
		}
		if got := choicesOf(confirm(t, "discard", "fingerprint="+groupCharge)).warns; got != "" {
			t.Errorf("a discard replays nothing, yet %q", got)
		}
		a.db.MustExec(`DELETE FROM workers`)
	})

	t.Run("EachChoiceCanBeCleared", func(t *testing.T) {
		doc := confirm(t, "replay", "fingerprint="+groupCharge)
		opID := operationFrom(t, a.submit(t, a.olga, doc, `[data-testid="confirm-form"]`, url.Values{
			"canary": nil, "rate_per_second": {""}, "died_again_percent": {""}}))
		op := a.waitOperation(t, opID, dlq.OpSettling)
		if op.Canary != 0 || op.RatePerSecond != nil || op.DiedAgainPercent != nil || op.Done != int64(len(ids[groupCharge])) {
			t.Errorf("cleared: canary %d, pace %v, guard %v, %d replayed; want none of them and %d replayed",
				op.Canary, op.RatePerSecond, op.DiedAgainPercent, op.Done, len(ids[groupCharge]))
		}
	})
}

// TestSeveralGroupsThroughTheConsole: fingerprint=A,B selects the letters
// of both groups in the list, its count, its export, the API, the bulk
// confirmation and the operation it starts; a group id that is not one is
// a 400 naming the field, never a 500.
func TestSeveralGroupsThroughTheConsole(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	ids := groupLetters(t, a)
	want := slices.Concat(ids[groupCharge], ids[groupRefund])
	slices.Sort(want)
	both := groupRefund + "," + groupCharge

	t.Run("ListAndExport", func(t *testing.T) {
		rec, doc := a.page(t, a.olga, "/dead-letters?fingerprint="+url.QueryEscape(both))
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %.300s", rec.Code, rec.Body.String())
		}
		var listed []int64
		doc.Find(`[data-testid="letter-row"]`).Each(func(_ int, s *goquery.Selection) {
			var id int64
			fmt.Sscanf(s.AttrOr("data-id", ""), "%d", &id)
			listed = append(listed, id)
		})
		slices.Sort(listed)
		if !slices.Equal(listed, want) {
			t.Errorf("listed %v, want %v", listed, want)
		}
		csvRec := a.olga.Do(a.h, httptest.NewRequest(http.MethodGet, "/dead-letters/export.csv?fingerprint="+url.QueryEscape(both), nil))
		rows, err := csv.NewReader(strings.NewReader(csvRec.Body.String())).ReadAll()
		if err != nil || len(rows) != len(want)+1 {
			t.Errorf("export: %d rows (%v), want a header and %d letters", len(rows), err, len(want))
		}
	})

	t.Run("API", func(t *testing.T) {
		rec, _ := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/dead-letters?limit=100&fingerprint="+url.QueryEscape(both), "")
		if rec.Code != http.StatusOK {
			t.Fatalf("%d %.300s", rec.Code, rec.Body.String())
		}
		page := decode[struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}](t, rec.Body.String())
		var got []int64
		for _, it := range page.Items {
			got = append(got, it.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("API listed %v, want %v", got, want)
		}
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay",
			`{"filter": {"fingerprint": "`+both+`"}, "dry_run": true}`)
		if rec.Code != http.StatusOK || num(body["matched"]) != int64(len(want)) {
			t.Errorf("dry run of both groups: %d %v, want %d matched", rec.Code, body, len(want))
		}
	})

	t.Run("BadIDsAreRefusedByName", func(t *testing.T) {
		for _, c := range []struct{ method, path, body, field string }{
			{http.MethodGet, "/api/v1/dead-letters?fingerprint=" + groupCharge + ",fp-card", "", "fingerprint"},
			{http.MethodGet, "/api/v1/dead-letters?fingerprint=" + groupCharge + "&fingerprint=" + groupRefund, "", "fingerprint"},
			{http.MethodPost, "/api/v1/dead-letters/replay", `{"filter": {"fingerprint": "` + groupCharge + `,x'--"}, "dry_run": true}`, "filter.fingerprint"},
		} {
			rec, _ := a.api(t, a.olgaAPI, c.method, c.path, c.body)
			body := decode[apiErrorBody](t, rec.Body.String())
			if (rec.Code != http.StatusBadRequest && rec.Code != http.StatusUnprocessableEntity) || body.Error.Fields[c.field] == "" {
				t.Errorf("%s %s: %d %v, want a 400 naming %s", c.method, c.path, rec.Code, body, c.field)
			}
		}
		rec, doc := a.page(t, a.olga, "/dead-letters?fingerprint="+groupCharge+",nope")
		if rec.Code != http.StatusBadRequest || !strings.Contains(squash(doc.Selection), `"nope" is not an error group`) {
			t.Errorf("the list of a bad group: %d, want a 400 that says which id is wrong", rec.Code)
		}
	})

	t.Run("ReplayOfBothGroups", func(t *testing.T) {
		_, list := a.page(t, a.olga, "/dead-letters?status=all&fingerprint="+url.QueryEscape(both))
		rec := a.submit(t, a.olga, list, `[data-testid="bulk-form"]`, url.Values{"action": {"replay"}, "all_matching": {"1"}})
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d %.300s", rec.Code, rec.Body.String())
		}
		confirm := parseHTML(t, rec)
		if got := text(confirm, "confirm-count"); got != fmt.Sprint(len(want)) {
			t.Fatalf("confirmation count %q, want %d", got, len(want))
		}
		if got := text(confirm, "confirm-skipped"); !strings.HasPrefix(got, "1 of the selected") {
			t.Errorf("skipped %q, want the replayed letter of the refunds group", got)
		}
		opID := operationFrom(t, a.submit(t, a.olga, confirm, `[data-testid="confirm-form"]`, url.Values{"canary": nil}))
		op := a.waitOperation(t, opID, dlq.OpSettling)
		var replayed []int64
		if err := a.db.Select(&replayed, `SELECT dead_letter_id FROM audit_event_letters WHERE audit_event_id = $1 ORDER BY 1`,
			*op.AuditEventID); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(replayed, want) {
			t.Errorf("replayed %v, want %v", replayed, want)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE fingerprint = $1 AND status = 'pending'`, groupReport); n != len(ids[groupReport]) {
			t.Errorf("%d letters of the third group left pending, want all %d", n, len(ids[groupReport]))
		}
		_, page := a.page(t, a.olga, fmt.Sprintf("/operations/%d", opID))
		if got := squash(page.Selection); !strings.Contains(got, "error groups "+groupCharge+", "+groupRefund) {
			t.Errorf("the operation's page does not name both groups: %.500s", got)
		}
	})
}
