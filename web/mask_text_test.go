package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/auth"
)

// The secrets of one letter, quoted by its error as a careless decode
// error does, and a token only an extra mask pattern knows.
const (
	leakPW    = "decode-leak-PW-9876"
	leakCard  = "7552"
	leakToken = "tok_live_4eC39HqLyjWDarjtT1"
)

var leakPatterns = []string{`tok_live_[A-Za-z0-9]+`}

// TestErrorTextMasked: what a letter's arguments hide is hidden in its
// error message, traceback and attempt history too, and so are matches of
// the extra patterns, on every page, API answer and export that shows
// error text: the list, the detail page, the groups, the overview, jobs,
// exports. Search, through the page and the API, finds the letter by what
// is shown and not by what is hidden.
func TestErrorTextMasked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) { c.Auth.MaskPatterns = leakPatterns })
	ctx := context.Background()
	m, err := mask.New(mask.DefaultKeys, leakPatterns)
	if err != nil {
		t.Fatal(err)
	}
	// What the console does at start.
	if _, err := e.store.Letters.ApplyMaskPolicy(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	kwargs := `{"password": "` + leakPW + `", "payment": {"card_last4": "` + leakCard + `"}, "order": "ord_42"}`
	msg := `card ending ` + leakCard + ` declined for ord_42 via ` + leakToken + `: invalid kwargs {"password": "` + leakPW + `"}`
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{
		Task: "billing.charge", Kwargs: kwargs, Message: msg,
		Traceback: "Traceback:\n  decode(" + leakPW + ")\n  charge(card=" + leakCard + ")",
		History: fmt.Sprintf(`[{"attempt": 1, "at": "2026-01-01T00:00:00Z", "class": "ValueError", "message": %q, "traceback": %q, "outcome": "dead"}]`,
			msg, "at "+leakPW),
	})
	res, err := e.store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "billing.charge", Kwargs: []byte(kwargs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.ExecContext(ctx, `UPDATE jobs SET last_error = $2, errors = $3 WHERE id = $1`, res.Job.ID, msg,
		fmt.Sprintf(`[{"attempt": 1, "at": "2026-01-01T00:00:00Z", "class": "ValueError", "message": %q, "outcome": "retry"}]`, msg)); err != nil {
		t.Fatal(err)
	}

	viewer := e.as(t, "vic", dlq.RoleViewer)
	pages := []string{
		"/dead-letters?status=all", fmt.Sprintf("/dead-letters/%d", id), "/groups", "/", "/overview/fragment",
		"/dead-letters/export.csv", "/dead-letters/export.json",
		"/api/v1/dead-letters", fmt.Sprintf("/api/v1/dead-letters/%d", id), "/api/v1/groups",
		"/jobs", fmt.Sprintf("/jobs/%d", res.Job.ID), fmt.Sprintf("/api/v1/jobs/%d", res.Job.ID),
	}
	for _, path := range pages {
		rec := viewer.Do(e.h, httptest.NewRequest("GET", path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d", path, rec.Code)
		}
		for _, secret := range []string{leakPW, "leak-PW", leakToken, "ending " + leakCard, "card=" + leakCard} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q", path, secret)
			}
		}
		if !strings.Contains(body, "card ending ••• declined for ord_42 via •••") {
			t.Errorf("%s does not show the masked message", path)
		}
	}

	// Search matches only what is shown.
	for _, q := range []string{"decode-leak", "ending 7552", "tok_live", `"password": "d`} {
		if rec := viewer.Do(e.h, httptest.NewRequest("GET", "/api/v1/dead-letters?status=all&q="+url.QueryEscape(q), nil)); strings.Contains(rec.Body.String(), `"id":`) {
			t.Errorf("API search for %q found the letter: %s", q, rec.Body.String())
		}
		if body := viewer.Do(e.h, httptest.NewRequest("GET", "/dead-letters?status=all&q="+url.QueryEscape(q), nil)).Body.String(); strings.Contains(body, fmt.Sprintf(`data-testid="letter-row" data-id="%d"`, id)) {
			t.Errorf("page search for %q found the letter", q)
		}
	}
	for _, q := range []string{"ending ••• declined", "ord_42", `"password": "•••"`} {
		if rec := viewer.Do(e.h, httptest.NewRequest("GET", "/api/v1/dead-letters?status=all&q="+url.QueryEscape(q), nil)); !strings.Contains(rec.Body.String(), fmt.Sprintf(`"id":%d`, id)) {
			t.Errorf("API search for %q did not find the letter: %s", q, rec.Body.String())
		}
		if body := viewer.Do(e.h, httptest.NewRequest("GET", "/dead-letters?status=all&q="+url.QueryEscape(q), nil)).Body.String(); !strings.Contains(body, fmt.Sprintf(`data-testid="letter-row" data-id="%d"`, id)) {
			t.Errorf("page search for %q did not find the letter", q)
		}
	}
}

// A bad extra pattern stops the server with the pattern named, instead
// of masking less than asked.
func TestMaskPatternRefused(t *testing.T) {
	t.Parallel()
	store := storetest.NewStores(storetest.NewDB(t).DB)
	for _, p := range []string{`(unclosed`, `x*`} {
		_, err := web.NewServer(web.Config{DB: store.DB, Auth: auth.Config{MaskPatterns: []string{p}}})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("pattern %q: err %v", p, err)
		}
	}
}

// TestSearchHidesEscapedSecrets: a secret holding a quote or a backslash
// that a handler quoted as JSON, or that a cut left half of, is hidden on
// the pages; search through the API and the page does not find the letter
// by it or its prefixes, and does by what is shown.
func TestSearchHidesEscapedSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	kwargs := `{"user": "erin", "password": "p\"q\\r<s>&t-Erin-77", "card_number": "4000056655665556"}`
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{
		Task: "probe.leak", Kwargs: kwargs,
		Message: `LeakError: invalid kwargs {"user": "erin", "password": "p\"q\\r<s>&t-Erin-77"} charged 400005` + mask.TruncatedMark,
	})
	viewer := e.as(t, "vic", dlq.RoleViewer)
	row := fmt.Sprintf(`data-testid="letter-row" data-id="%d"`, id)
	if body := viewer.Do(e.h, httptest.NewRequest("GET", fmt.Sprintf("/api/v1/dead-letters/%d", id), nil)).Body.String(); strings.Contains(body, "Erin-77") || strings.Contains(body, "400005") {
		t.Fatalf("the letter shows its secret: %s", body)
	}
	for _, q := range []string{"Erin-77", `p\"q`, `"password": "p`, `"password": "p\"`, "400005", "charged 4"} {
		if rec := viewer.Do(e.h, httptest.NewRequest("GET", "/api/v1/dead-letters?status=all&q="+url.QueryEscape(q), nil)); strings.Contains(rec.Body.String(), `"id":`) {
			t.Errorf("API search for %q found the letter: %s", q, rec.Body.String())
		}
		if body := viewer.Do(e.h, httptest.NewRequest("GET", "/dead-letters?status=all&q="+url.QueryEscape(q), nil)).Body.String(); strings.Contains(body, row) {
			t.Errorf("page search for %q found the letter", q)
		}
	}
	for _, q := range []string{`"user": "erin", "password": "•••"}`, "charged •••" + mask.TruncatedMark} {
		if rec := viewer.Do(e.h, httptest.NewRequest("GET", "/api/v1/dead-letters?status=all&q="+url.QueryEscape(q), nil)); !strings.Contains(rec.Body.String(), fmt.Sprintf(`"id":%d`, id)) {
			t.Errorf("API search for %q did not find the letter: %s", q, rec.Body.String())
		}
		if body := viewer.Do(e.h, httptest.NewRequest("GET", "/dead-letters?status=all&q="+url.QueryEscape(q), nil)).Body.String(); !strings.Contains(body, row) {
			t.Errorf("page search for %q did not find the letter", q)
		}
	}
}
