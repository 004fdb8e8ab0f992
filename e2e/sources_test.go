package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replayhook"
	"github.com/redrive/redrive/store/storetest"
)

// Another system sends its failures over HTTP with a token limited to its
// source; an admin finds the source on the sources page, follows its
// letters to the list and opens one: it says where it came from, its id
// there, and why it is not replayed here.
func TestLettersFromAnotherSystem(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "legacy", Kind: dlq.SourceKindHTTP}}}})

	ensureUser(t, db, "olga", dlq.RoleOperator)
	secret, err := dlq.NewTokenSecret()
	must(t, err)
	_, err = store.Access.CreateToken(context.Background(), dlq.NewToken{UserName: "olga", Label: "legacy-sender",
		Sources: []string{"legacy"}, Hash: dlq.HashToken(secret), Actor: dlq.Actor{Name: "e2e"}, Now: time.Now()})
	must(t, err)
	var letters []string
	for i := range 3 {
		letters = append(letters, fmt.Sprintf(`{"external_id": "celery-%d", "task": "invoices.render", "queue": "pdf",
			"args": [%d], "error_class": "TemplateNotFound", "error": "invoice_v2.html not found in /srv/templates/%d",
			"traceback": "Traceback (most recent call last):\n  File \"tasks.py\", line 42, in render\nTemplateNotFound: invoice_v2.html",
			"attempts": 3, "max_attempts": 3, "failed_at": "%s"}`, i, 1000+i, i, time.Now().Add(-time.Duration(i)*time.Minute).UTC().Format(time.RFC3339)))
	}
	req, err := http.NewRequest("POST", base+"/api/v1/letters", strings.NewReader(`{"source": "legacy", "letters": [`+strings.Join(letters, ",")+`]}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("sending the letters: %d", res.StatusCode)
	}

	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleAdmin)
	_, err = page.Goto(base + "/admin/sources")
	must(t, err)
	row := page.Locator(`tr[data-source="legacy"]`)
	must(t, expect.Locator(row.GetByTestId("source-letters")).ToHaveText("3"))
	must(t, expect.Locator(row.GetByTestId("source-no-replay")).ToContainText("names no replay endpoint"))
	screenshot(t, page, "admin-sources")

	must(t, row.GetByTestId("source-pending").Click())
	must(t, expect.Locator(byTestID(page, "letter-count")).ToContainText("3 pending letters match"))
	screenshot(t, page, "letters-of-a-source")
	must(t, page.Locator(`tr[data-testid="letter-row"] [data-testid="letter-link"]`).First().Click())
	must(t, expect.Locator(byTestID(page, "letter-source")).ToHaveText("legacy, its id there celery-0"))
	must(t, expect.Locator(byTestID(page, "replay-refused")).ToContainText("arrived over HTTP"))
	must(t, expect.Locator(byTestID(page, "replay-form")).ToHaveCount(0))
	screenshot(t, page, "letter-of-a-source")
}

// A system that sends its letters over HTTP names a replay endpoint: an
// operator replays a letter from its page, the console posts it there,
// signed, and keeps trying while the endpoint is down (the sources page
// says why it waits); once it is up the endpoint runs it, reports that it
// succeeded, and the audit entry of the replay says so.
func TestWebhookReplayFollowed(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	key := []byte(strings.Repeat("legacy-replay-key-", 2))
	up := new(atomic.Bool)
	delivered := make(chan replayhook.Replay, 4)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := replayhook.Verify(key, r.Header.Get(replayhook.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		if !up.Load() {
			http.Error(w, "invoicing is deploying", http.StatusServiceUnavailable)
			return
		}
		var rp replayhook.Replay
		if err := json.Unmarshal(body, &rp); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		delivered <- rp
		fmt.Fprint(w, `{"job_id": 5150}`)
	}))
	t.Cleanup(endpoint.Close)
	ln := listenLocal(t)
	base, _ := serveConsoleOn(t, ln, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Notify: redrive.NotifyConfig{PublicURL: "http://" + ln.Addr().String()},
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "legacy", Kind: dlq.SourceKindHTTP, ReplayURL: &endpoint.URL},
			ReplaySecret: key}}})

	ensureUser(t, db, "olga", dlq.RoleOperator)
	token, err := dlq.NewTokenSecret()
	must(t, err)
	_, err = store.Access.CreateToken(context.Background(), dlq.NewToken{UserName: "olga", Label: "legacy-sender",
		Sources: []string{"legacy"}, Hash: dlq.HashToken(token), Actor: dlq.Actor{Name: "e2e"}, Now: time.Now()})
	must(t, err)
	post := func(path, body string) int {
		t.Helper()
		req, err := http.NewRequest("POST", path, strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	if code := post(base+"/api/v1/letters", `{"source": "legacy", "letters": [{"external_id": "inv-88", "task": "invoices.render",
		"queue": "pdf", "args": [88], "error_class": "TemplateNotFound", "error": "invoice_v2.html not found",
		"attempts": 3, "max_attempts": 3, "failed_at": "2026-12-07T06:00:00Z"}]}`); code != http.StatusCreated {
		t.Fatalf("sending the letter: %d", code)
	}
	var letter int64
	must(t, db.Get(&letter, `SELECT dead_letter_id FROM letter_sources WHERE external_id = 'inv-88'`))

	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleAdmin)
	_, err = page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, letter))
	must(t, err)
	must(t, expect.Locator(byTestID(page, "replay-in-source")).ToContainText("posts this letter to legacy's replay endpoint"))
	must(t, byTestID(page, "replay-reason").Fill("template restored"))
	must(t, byTestID(page, "replay").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("being sent to legacy's replay endpoint"))
	screenshot(t, page, "webhook-letter-replayed")

	// The endpoint is down: the sources page says the replay waits, and why.
	_, err = page.Goto(base + "/admin/sources")
	must(t, err)
	row := page.Locator(`tr[data-source="legacy"]`)
	must(t, expect.Locator(row.GetByTestId("source-replay")).ToContainText("posted, signed, to "+strings.TrimPrefix(endpoint.URL, "http://")))
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := row.GetByTestId("source-replay-problem").Count()
		must(t, err)
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sources page never said why the replay waits")
		}
		time.Sleep(200 * time.Millisecond)
		_, err = page.Reload()
		must(t, err)
	}
	must(t, expect.Locator(row.GetByTestId("source-replay-problem")).ToContainText("503 invoicing is deploying"))
	must(t, expect.Locator(row.GetByTestId("source-replays-waiting")).ToHaveText("1 replay waiting to be sent"))
	screenshot(t, page, "webhook-source-waiting")

	// Up again: delivered once, and its outcome reported where it says.
	up.Store(true)
	var rp replayhook.Replay
	select {
	case rp = <-delivered:
	case <-time.After(30 * time.Second):
		t.Fatal("the replay never reached the endpoint once it was up")
	}
	if rp.DeadLetterID != letter || rp.ExternalID != "inv-88" || string(rp.Args) != "[88]" ||
		rp.OutcomeURL != fmt.Sprintf("%s/api/v1/letters/%d/outcome", base, letter) {
		t.Errorf("the replay posted: %+v", rp)
	}
	if code := post(rp.OutcomeURL, `{"state": "succeeded"}`); code != http.StatusOK {
		t.Fatalf("reporting the outcome: %d", code)
	}
	var entry int64
	must(t, db.Get(&entry, `SELECT id FROM audit_events WHERE action = 'replay' AND dead_letter_id = $1`, letter))
	_, err = page.Goto(fmt.Sprintf("%s/audit/%d", base, entry))
	must(t, err)
	must(t, expect.Locator(page.GetByText("replay succeeded in legacy")).ToHaveCount(1))
	screenshot(t, page, "webhook-replay-audit")
	_, err = page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, letter))
	must(t, err)
	must(t, expect.Locator(byTestID(page, "replayed-as")).ToContainText("in legacy: its job 5150 runs again there"))
	select {
	case again := <-delivered:
		t.Errorf("the replay was delivered twice: %+v", again)
	default:
	}
}
