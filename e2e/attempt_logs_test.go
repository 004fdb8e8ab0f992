package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker"
)

// TestAttemptLogs: a real worker runs a charge that logs through
// worker.Logger, quoting the job's secret token, fails, then logs far past
// the 64 KiB an attempt keeps and dies. On the letter's page the on-call
// engineer reads each attempt's lines under it: the secret masked, the
// short ones open, the long ones collapsed and said to be cut, the link to
// the team's logs beside them; the job's page shows the same.
func TestAttemptLogs(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	ctx := context.Background()
	const secret = "tok_live_9f8e7d6c5b4a"

	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(ctx context.Context, job *worker.Job) error {
		log := worker.Logger(ctx).With("order", "A-1042")
		if job.Attempt == 1 {
			log.Info("charging card", "amount_cents", 4999)
			log.Warn("gateway refused", "status", 402, "auth", "Bearer "+secret)
			return errors.New("gateway: 402 payment required")
		}
		for i := range 1500 {
			log.Info("reconciling ledger row", "row", i)
		}
		return worker.Permanent(errors.New("ledger out of balance by 12.00 EUR"))
	}, worker.TaskOptions{})
	stores := storetest.NewStores(db.DB)
	if err := stores.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	res, err := stores.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "billing.charge", MaxAttempts: 2,
		Kwargs: []byte(`{"customer": "c-77", "token": "` + secret + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		stopped <- redrive.RunWorker(wctx, db.DB, worker.Config{Registry: reg, Concurrency: 2,
			PollInterval: 50 * time.Millisecond, Logger: logger, ShutdownGrace: 5 * time.Second,
			RetryPolicy: worker.RetryPolicy{Base: 10 * time.Millisecond, Cap: 20 * time.Millisecond}})
	}()
	t.Cleanup(func() {
		stop()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	storetest.WaitFor(t, 30*time.Second, "the charge to be dead-lettered", func() bool {
		return countRows(t, db, `SELECT count(*) FROM dead_letters WHERE job_id = $1`, res.Job.ID) == 1
	})
	var letter int64
	if err := db.Get(&letter, `SELECT id FROM dead_letters WHERE job_id = $1`, res.Job.ID); err != nil {
		t.Fatal(err)
	}

	logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		LogsURLTemplate: "https://logs.example/search?job={job_id}&from={from}&to={to}"})
	page := newPage(t)
	signInOlga(t, page, base, db)
	_, err = page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, letter))
	must(t, err)

	attempts := page.Locator(`[data-testid="attempt"]`)
	must(t, expect.Locator(attempts).ToHaveCount(2))
	first, second := attempts.Nth(0).Locator(`[data-testid="attempt-logs"]`), attempts.Nth(1).Locator(`[data-testid="attempt-logs"]`)
	// The short lines are open at once, the secret masked.
	must(t, expect.Locator(first.Locator("summary")).ToHaveText("Logs of this attempt · 2 lines"))
	must(t, expect.Locator(first.Locator("pre")).ToBeVisible())
	must(t, expect.Locator(first.Locator("pre")).ToContainText(`msg="charging card" order=A-1042 amount_cents=4999`))
	must(t, expect.Locator(first.Locator("pre")).ToContainText(`auth="Bearer •••"`))
	must(t, expect.Locator(page.Locator("body")).Not().ToContainText(secret))
	must(t, expect.Locator(attempts.Nth(0).Locator(`[data-testid="logs-link"]`)).
		ToHaveAttribute("href", regexp.MustCompile(fmt.Sprintf(`^https://logs\.example/search\?job=%d&`, res.Job.ID))))
	// The long ones are collapsed, and say they were cut.
	must(t, expect.Locator(second.Locator("summary")).ToHaveText(regexp.MustCompile(`^Logs of this attempt · \d+ lines \(cut at 64 KiB\)$`)))
	must(t, expect.Locator(second.Locator("pre")).Not().ToBeVisible())
	screenshot(t, page, "attempt-logs-letter")
	must(t, second.Locator("summary").Click())
	must(t, expect.Locator(second.Locator("pre")).ToBeVisible())
	must(t, expect.Locator(second.Locator("pre")).ToContainText(`msg="reconciling ledger row" order=A-1042 row=0`))
	must(t, expect.Locator(second.Locator("pre")).ToContainText(regexp.MustCompile(`… \d+ more lines, \d+\.\d KiB, cut\s*$`)))
	kept, err := second.Locator("pre").TextContent()
	must(t, err)
	if n := strings.Count(kept, "reconciling ledger row"); n < 500 || n >= 1500 {
		t.Errorf("%d lines kept of 1,500, want the first 64 KiB of them", n)
	}
	screenshot(t, page, "attempt-logs-letter-expanded")

	// The job's page shows the same lines under the same attempts.
	must(t, page.Locator(`[data-testid="job-link"]`).Click())
	must(t, expect.Page(page).ToHaveURL(fmt.Sprintf("%s/jobs/%d", base, res.Job.ID)))
	jobAttempts := page.Locator(`[data-testid="attempt"]`)
	must(t, expect.Locator(jobAttempts).ToHaveCount(2))
	must(t, expect.Locator(jobAttempts.Nth(0).Locator(`[data-testid="attempt-logs"] pre`)).ToContainText(`auth="Bearer •••"`))
	must(t, expect.Locator(jobAttempts.Nth(1).Locator(`[data-testid="attempt-logs"] summary`)).ToContainText("(cut at 64 KiB)"))
	must(t, expect.Locator(jobAttempts.Nth(1).Locator(`[data-testid="logs-link"]`)).ToBeVisible())
	must(t, expect.Locator(page.Locator("body")).Not().ToContainText(secret))
	screenshot(t, page, "attempt-logs-job")
}
