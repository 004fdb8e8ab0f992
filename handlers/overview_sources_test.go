package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// overviewSourceRows reads the overview's sources panel: each source's
// pending count, and the link of that count.
func overviewSourceRows(t *testing.T, doc *goquery.Document) (pending map[string]string, hrefs map[string]string) {
	t.Helper()
	pending, hrefs = map[string]string{}, map[string]string{}
	doc.Find(`[data-testid="overview-sources"] tr[data-testid="source-row"]`).Each(func(_ int, row *goquery.Selection) {
		name := row.AttrOr("data-source", "")
		link := row.Find(`[data-testid="source-pending"]`)
		pending[name], hrefs[name] = squash(link), link.AttrOr("href", "")
	})
	return pending, hrefs
}

// sendLetters posts letters of source over HTTP, as another system does,
// one per external id.
func sendLetters(t *testing.T, a actions, source string, externalIDs ...string) []int64 {
	t.Helper()
	var letters []string
	for _, id := range externalIDs {
		letters = append(letters, fmt.Sprintf(`{"external_id": %q, "task": "billing.charge", "error_class": "ConnectionError",
			"error": "reset by peer", "failed_at": "2026-12-07T06:00:00Z"}`, id))
	}
	rec, body := a.api(t, a.olgaAPI, "POST", "/api/v1/letters", `{"source": "`+source+`", "letters": [`+strings.Join(letters, ",")+`]}`)
	if rec.Code != http.StatusCreated && rec.Code != http.StatusOK {
		t.Fatalf("ingest into %s: %d %s", source, rec.Code, rec.Body)
	}
	var ids []int64
	for _, l := range body["letters"].([]any) {
		ids = append(ids, num(l.(map[string]any)["id"]))
	}
	return ids
}

// The overview counts each source's pending letters, linked to the list of
// them, once more than Redrive's own queue sends letters; the counts follow
// letters sent over HTTP (a letter sent twice is one), imported from River,
// discarded, restored, replayed and discarded in bulk, and agree with the
// letters themselves. A River source whose import fails says so, linked to
// the sources page for those who may open it.
func TestOverviewSources(t *testing.T) {
	t.Parallel()

	t.Run("OnlyRedriveShowsNothingMore", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.letters(t, 2, "billing.charge")
		rec, doc := a.page(t, a.vic, "/")
		if rec.Code != http.StatusOK {
			t.Fatalf("overview: %d", rec.Code)
		}
		if doc.Find(`[data-testid="overview-sources"]`).Length() != 0 {
			t.Error("the overview shows sources with only Redrive's own queue")
		}
	})

	t.Run("CountsFollowTheLetters", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ctx := context.Background()
		if err := a.store.Sources.Configure(ctx, []dlq.Source{{Name: "legacy", Kind: dlq.SourceKindHTTP},
			{Name: "shop", Kind: dlq.SourceKindRiver}}); err != nil {
			t.Fatal(err)
		}
		own := a.letters(t, 3, "billing.charge")
		legacy := sendLetters(t, a, "legacy", "l-1", "l-2", "l-3", "l-4", "l-1")
		sendLetters(t, a, "legacy", "l-1", "l-5") // l-1 a third time: still one letter
		var river []dlq.IngestLetter
		for i := range 4 {
			l, err := dlq.IngestLetter{ExternalID: fmt.Sprintf("%d/1", 100+i), Task: "orders.ship", Queue: "default",
				ErrorClass: "TimeoutError", Message: "carrier timed out", Attempts: 1, MaxAttempts: 1,
				FailedAt: time.Now().Add(-time.Minute)}.Normalise(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			river = append(river, l)
		}
		if _, err := a.store.Sources.Import(ctx, "shop", river, "", "c1"); err != nil {
			t.Fatal(err)
		}
		if err := a.store.Sources.ImportChecked(ctx, "shop"); err != nil {
			t.Fatal(err)
		}

		want := func(step string, counts map[string]string) {
			t.Helper()
			for _, path := range []string{"/", handlers.OverviewRefreshURL} {
				rec, doc := a.page(t, a.vic, path)
				if rec.Code != http.StatusOK {
					t.Fatalf("%s: %s: %d", step, path, rec.Code)
				}
				got, hrefs := overviewSourceRows(t, doc)
				if fmt.Sprint(got) != fmt.Sprint(counts) {
					t.Errorf("%s: %s counts %v, want %v", step, path, got, counts)
				}
				for name, href := range hrefs {
					if href != "/dead-letters?source="+name {
						t.Errorf("%s: %s's pending links to %q", step, name, href)
					}
				}
			}
			storetest.AssertSummariesMatch(t, a.db)
		}
		want("sent and imported", map[string]string{dlq.RedriveSource: "3", "legacy": "5", "shop": "4"})

		_, doc := a.page(t, a.vic, "/")
		kinds := map[string]string{}
		doc.Find(`[data-testid="overview-sources"] tr[data-testid="source-row"]`).Each(func(_ int, row *goquery.Selection) {
			kinds[row.AttrOr("data-source", "")] = squash(row.Find(`[data-testid="source-kind"]`))
		})
		if fmt.Sprint(kinds) != fmt.Sprint(map[string]string{dlq.RedriveSource: "Redrive's queue", "legacy": "HTTP", "shop": "River"}) {
			t.Errorf("kinds %v", kinds)
		}
		if got := squash(doc.Find(`tr[data-source="shop"] [data-testid="source-checked"]`)); !strings.HasPrefix(got, "read to the end") {
			t.Errorf("shop's health %q, want when it was read to the end", got)
		}

		for _, id := range legacy[:2] {
			if rec, body := a.api(t, a.olgaAPI, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason": "noise"}`); rec.Code != http.StatusOK {
				t.Fatalf("discard %d: %d %v", id, rec.Code, body)
			}
		}
		if rec, body := a.api(t, a.olgaAPI, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", own[0]), `{}`); rec.Code != http.StatusOK {
			t.Fatalf("replay %d: %d %v", own[0], rec.Code, body)
		}
		want("two discarded, one replayed", map[string]string{dlq.RedriveSource: "2", "legacy": "3", "shop": "4"})

		if rec, body := a.api(t, a.olgaAPI, "POST", fmt.Sprintf("/api/v1/dead-letters/%d/restore", legacy[0]), `{"reason": "not noise"}`); rec.Code != http.StatusOK {
			t.Fatalf("restore %d: %d %v", legacy[0], rec.Code, body)
		}
		want("one restored", map[string]string{dlq.RedriveSource: "2", "legacy": "4", "shop": "4"})

		if rec, body := a.api(t, a.olgaAPI, "POST", "/api/v1/dead-letters/discard", `{"filter": {"source": "shop"}, "reason": "shipped by hand"}`); rec.Code != http.StatusOK || num(body["discarded"]) != 4 {
			t.Fatalf("bulk discard of shop's letters: %d %v", rec.Code, body)
		}
		want("shop's discarded in bulk", map[string]string{dlq.RedriveSource: "2", "legacy": "4", "shop": "0"})

		// A failing import says what fails; only an admin gets the link to
		// the sources page (a viewer could not open it).
		if err := a.store.Sources.ImportFailed(ctx, "shop", "river source shop: list discarded jobs: connection refused"); err != nil {
			t.Fatal(err)
		}
		_, doc = a.page(t, a.vic, "/")
		if got := squash(doc.Find(`tr[data-source="shop"] [data-testid="source-error"]`)); !strings.Contains(got, "Import failing") ||
			!strings.Contains(got, "connection refused") {
			t.Errorf("shop's failing import reads %q", got)
		}
		if doc.Find(`[data-testid="source-health-link"]`).Length() != 0 {
			t.Error("a viewer is linked to the sources page")
		}
		webtest.CreateUser(t, a.store.Access, "ada", dlq.RoleAdmin)
		ada := webtest.SignIn(t, a.h, "ada", webtest.Password)
		_, doc = a.page(t, ada, "/")
		if href := doc.Find(`tr[data-source="shop"] [data-testid="source-health-link"]`).AttrOr("href", ""); href != "/admin/sources" {
			t.Errorf("an admin's link to the failing source: %q, want /admin/sources", href)
		}
		if doc.Find(`tr[data-source="legacy"] [data-testid="source-error"]`).Length() != 0 {
			t.Error("legacy, which imports nothing, is shown failing")
		}
	})
}
