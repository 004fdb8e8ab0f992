package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
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
	must(t, page.Locator(`tr[data-testid="letter-row"] a`).First().Click())
	must(t, expect.Locator(byTestID(page, "letter-source")).ToHaveText("legacy, its id there celery-0"))
	must(t, expect.Locator(byTestID(page, "replay-refused")).ToContainText("arrived over HTTP"))
	must(t, expect.Locator(byTestID(page, "replay-form")).ToHaveCount(0))
	screenshot(t, page, "letter-of-a-source")
}
