package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	db := storetest.NewDB(t)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	fixed := new(atomic.Bool)
	_, app := riversourcetest.App(t, db.DSN, func(w *river.Workers) { river.AddWorker(w, riversourcetest.ShipWorker{Fixed: fixed}) })
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "shop", Kind: dlq.SourceKindRiver}, DatabaseURL: db.DSN}}})

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
	must(t, page.Locator(`tr[data-testid="letter-row"] a`).Last().Click())
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
