package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/playwright-community/playwright-go"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/riversource/riversourcetest"
	"github.com/redrive/redrive/store/storetest"
)

// A River app's jobs die; the console, with the app's River named as a
// source, shows them as letters of that source within seconds, one group
// for the one failure; once the fix shipped, an operator replays one from
// its page and River runs the same job again, to completion. The sources
// page says when River was last read.
func TestRiverLettersReplayedInRiver(t *testing.T) {
	t.Parallel()
	db, base, app, fixed := shopOnRiver(t)

	ctx := context.Background()
	jobs := riversourcetest.Ship(t, app, 4)

	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleAdmin)
	_, err := page.Goto(base + "/dead-letters?source=shop")
	must(t, err)
	// The list does not refresh by itself: reload until the importer has
	// brought all four in (River discards them in well under a second,
	// the importer passes them a second later).
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := page.Locator(`[data-testid="letter-row"]`).Count()
		must(t, err)
		if n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 River letters listed after 15 s", n)
		}
		time.Sleep(300 * time.Millisecond)
		_, err = page.Reload()
		must(t, err)
	}
	must(t, expect.Locator(page.Locator(`[data-testid="letter-source-tag"]`).First()).ToHaveText("shop"))
	screenshot(t, page, "river-letters")

	// One failure, one group.
	var groups int
	must(t, db.Get(&groups, `SELECT count(DISTINCT fingerprint) FROM dead_letter_records WHERE task = 'ship_order'`))
	if groups != 1 {
		t.Errorf("4 refusals of the courier API fell into %d groups, want 1", groups)
	}

	// The fix shipped; replay the oldest from its page.
	fixed.Store(true)
	must(t, page.Locator(`tr[data-testid="letter-row"] [data-testid="letter-link"]`).Last().Click())
	must(t, expect.Locator(byTestID(page, "letter-source")).ToContainText("shop: River job "))
	source, err := byTestID(page, "letter-source").TextContent()
	must(t, err)
	var job int64
	if _, err := fmt.Sscanf(strings.TrimSpace(source), "shop: River job %d in queue payments, discarded at attempt 1", &job); err != nil || !slices.Contains(jobs, job) {
		t.Fatalf("the letter says %q: not one of River's jobs %v at attempt 1", source, jobs)
	}
	must(t, expect.Locator(byTestID(page, "letter-source-extra")).ToHaveText("priority 1 · tags checkout"))
	must(t, expect.Locator(byTestID(page, "replay-in-source")).ToContainText("retries this job in shop"))
	must(t, expect.Locator(byTestID(page, "edit-details")).ToHaveCount(0))
	must(t, byTestID(page, "replay-reason").Fill("courier token rotated"))
	must(t, byTestID(page, "replay").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText(fmt.Sprintf("shop runs its job %d again", job)))
	must(t, expect.Locator(byTestID(page, "replayed-as")).ToContainText(fmt.Sprintf("in shop: its job %d runs again there", job)))
	screenshot(t, page, "river-letter-replayed")

	deadline = time.Now().Add(15 * time.Second)
	for {
		row, err := app.JobGet(ctx, job)
		must(t, err)
		if row.State == rivertype.JobStateCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("River's job %d is %s 15 s after its replay, want completed", job, row.State)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Another, a test order, is discarded, and its job deleted in River.
	other := jobs[0]
	if other == job {
		other = jobs[1]
	}
	var otherLetter int64
	must(t, db.Get(&otherLetter, `SELECT dead_letter_id FROM letter_sources WHERE external_id = $1`, fmt.Sprintf("%d/1", other)))
	_, err = page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, otherLetter))
	must(t, err)
	must(t, byTestID(page, "discard-details").Locator("summary").Click())
	must(t, byTestID(page, "discard-reason").Fill("test order from staging"))
	must(t, byTestID(page, "delete-in-source").Check())
	screenshot(t, page, "river-letter-discard")
	must(t, byTestID(page, "discard").Click())
	must(t, expect.Locator(byTestID(page, "action-result")).ToContainText("Discarded"))
	if _, err := app.JobGet(ctx, other); !errors.Is(err, river.ErrNotFound) {
		t.Errorf("River still has job %d, discarded with its deletion asked: err %v", other, err)
	}

	_, err = page.Goto(base + "/admin/sources")
	must(t, err)
	row := page.Locator(`tr[data-source="shop"]`)
	must(t, expect.Locator(row).ToContainText("River: Redrive imports the jobs it discarded"))
	must(t, expect.Locator(row.GetByTestId("source-letters")).ToHaveText("4"))
	must(t, expect.Locator(row.GetByTestId("source-pending")).ToHaveText("2"))
	must(t, expect.Locator(row.GetByTestId("source-checked")).ToContainText("River read to the end"))
	must(t, expect.Locator(row.GetByTestId("source-error")).ToHaveCount(0))
	screenshot(t, page, "river-source")
}

// River's letters, from the overview to a settled group replay: the
// overview's top group is the River app's one failure; once the fix
// shipped, "Replay this group" runs a canary of two in River, then, once
// released, the rest at the chosen pace, and the operation page follows
// them in River until every one has settled.
func TestRiverGroupReplaySettles(t *testing.T) {
	t.Parallel()
	db, base, app, fixed := shopOnRiver(t)
	ctx := context.Background()
	const n = 8
	jobs := riversourcetest.Ship(t, app, n)

	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleAdmin)
	_, err := page.Goto(base + "/")
	must(t, err)
	deadline := time.Now().Add(15 * time.Second)
	for {
		text, err := page.Locator(`[data-testid="top-group"] [data-testid="group-pending"]`).AllTextContents()
		must(t, err)
		if len(text) == 1 && text[0] == fmt.Sprint(n) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview's top groups show %v pending after 15 s, want one group of %d", text, n)
		}
		time.Sleep(300 * time.Millisecond)
		_, err = page.Reload()
		must(t, err)
	}
	screenshot(t, page, "river-overview")
	must(t, byTestID(page, "top-group-link").Click())
	must(t, expect.Locator(byTestID(page, "group-pending")).ToHaveText(fmt.Sprint(n)))

	// The fix shipped: replay the group, two first, then four a second.
	fixed.Store(true)
	must(t, byTestID(page, "group-replay").Click())
	must(t, expect.Locator(byTestID(page, "confirm-title")).ToHaveText(fmt.Sprintf("Replay %d dead letters?", n)))
	must(t, byTestID(page, "confirm-canary").Check())
	must(t, byTestID(page, "confirm-canary-size").Fill("2"))
	must(t, byTestID(page, "confirm-rate").Fill("4"))
	must(t, byTestID(page, "confirm-reason").Fill("courier token rotated"))
	screenshot(t, page, "river-group-replay-confirmation")
	must(t, byTestID(page, "confirm").Click())
	must(t, expect.Page(page).ToHaveURL(regexp.MustCompile(`/operations/\d+$`)))

	// The canary's two jobs run in River and succeed.
	must(t, expect.Locator(byTestID(page, "canary-verdict")).ToContainText("succeeded",
		playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(30_000)}))
	must(t, expect.Locator(page.Locator(`[data-testid="canary-job"][data-state="succeeded"]`)).ToHaveCount(2))
	must(t, expect.Locator(byTestID(page, "canary-jobs")).ToContainText(" in shop"))
	screenshot(t, page, "river-group-replay-canary")
	must(t, byTestID(page, "release").Click())

	// The rest at four a second: settled within a few seconds.
	must(t, expect.Locator(byTestID(page, "op-progress")).ToHaveAttribute("data-state", "done",
		playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(30_000)}))
	must(t, expect.Locator(byTestID(page, "op-settled-count")).ToContainText(fmt.Sprintf("%d of %d settled", n, n)))
	must(t, expect.Locator(byTestID(page, "replays-succeeded")).ToContainText(fmt.Sprint(n)))
	must(t, expect.Locator(byTestID(page, "replays-died-again")).ToContainText("0"))
	screenshot(t, page, "river-group-replay-settled")
	for _, id := range jobs {
		row, err := app.JobGet(ctx, id)
		must(t, err)
		if row.State != rivertype.JobStateCompleted {
			t.Errorf("River job %d is %s after the settled replay, want completed", id, row.State)
		}
	}
	// Paced: the six after the canary were due a quarter of a second
	// apart, and none was retried in River before it was due.
	var spread float64
	var early int
	must(t, db.QueryRow(`SELECT extract(epoch FROM max(run_at) - min(run_at)), count(*) FILTER (WHERE sent_at < run_at)
		FROM (SELECT run_at, sent_at FROM source_replays ORDER BY dead_letter_id OFFSET 2) s`).Scan(&spread, &early))
	if spread < 1.24 || early > 0 {
		t.Errorf("the released replays were due over %.2f s (at 4 a second: 1.25 s), %d sent before they were due", spread, early)
	}
}

// shopOnRiver runs a River app shipping orders (failing until fixed is
// set) in a database of its own, and a console with its River as the
// source shop; it returns the database, the console's address and the app.
func shopOnRiver(t *testing.T) (*storetest.DB, string, *river.Client[pgx.Tx], *atomic.Bool) {
	t.Helper()
	db := storetest.NewDB(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	fixed := new(atomic.Bool)
	_, app := riversourcetest.App(t, db.DSN, func(w *river.Workers) { river.AddWorker(w, riversourcetest.ShipWorker{Fixed: fixed}) })
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "shop", Kind: dlq.SourceKindRiver}, DatabaseURL: db.DSN}}})
	return db, base, app, fixed
}
