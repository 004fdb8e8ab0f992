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

// TestTaskTimings runs real jobs through a worker (most succeed after
// 30 ms, every fifth dies at once), then follows a letter's task from the letter
// list to the task's page, and the jobs page's task to the same page: its
// runs, failures, dead letters and run times, drawn from the summaries
// the worker flushed. The /tasks index lists it.
func TestTaskTimings(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	must(t, store.Queue.RegisterTasks(ctx, []string{"billing.charge"}))
	reg := worker.NewRegistry()
	reg.Register("billing.charge", func(ctx context.Context, j *worker.Job) error {
		if strings.HasSuffix(string(j.Args), "0]") || strings.HasSuffix(string(j.Args), "5]") {
			return worker.Permanent(errors.New("CardDeclined: card declined"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Millisecond):
		}
		return nil
	}, worker.TaskOptions{})
	for i := range 20 {
		_, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "billing.charge", Args: []byte(fmt.Sprintf("[%d]", i+1))})
		must(t, err)
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	wctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() {
		ran <- redrive.RunWorker(wctx, store.DB, worker.Config{Registry: reg, Concurrency: 4, PollInterval: 20 * time.Millisecond,
			TimingsInterval: 100 * time.Millisecond, ShutdownGrace: time.Second, Logger: logger})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
	storetest.WaitFor(t, 20*time.Second, "the worker to run and summarise the 20 jobs", func() bool {
		var runs int
		_ = db.Get(&runs, `SELECT coalesce(sum(runs), 0) FROM task_timings WHERE span = 'minute'`)
		return runs == 20
	})

	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)
	_, err := page.Goto(base + "/dead-letters")
	must(t, err)
	must(t, page.GetByTestId("letter-task-link").First().Click())
	must(t, expect.Page(page).ToHaveURL(base+"/tasks/billing.charge"))
	must(t, expect.Locator(page.GetByTestId("task-name")).ToHaveText("billing.charge"))
	for _, window := range []string{"1h", "1d", "14d"} {
		row := page.Locator(`[data-testid="task-runs-row"][data-window="` + window + `"]`)
		must(t, expect.Locator(row.GetByTestId("runs")).ToHaveText("20"))
		must(t, expect.Locator(row.GetByTestId("failures")).ToHaveText("4"))
		must(t, expect.Locator(row.GetByTestId("dead")).ToHaveText("4"))
	}
	// The handlers slept 30 ms, or failed at once: the median is a
	// sleep's, shown as the middle of its bucket, within 9% of it: a
	// run of 30.0-30.4 ms falls in [25.6, 30.4) ms, shown as 27 ms.
	must(t, expect.Locator(page.Locator(`[data-testid="task-timings-row"][data-window="1h"]`).GetByTestId("run-p50")).ToHaveText(
		regexp.MustCompile(`^(2[7-9]|3[0-9]) ms$`)))
	screenshot(t, page, "task-page")

	// The jobs page leads to the same page; the index lists the task.
	_, err = page.Goto(base + "/jobs")
	must(t, err)
	must(t, page.GetByTestId("job-task-link").First().Click())
	must(t, expect.Page(page).ToHaveURL(base+"/tasks/billing.charge"))
	must(t, page.GetByTestId("crumb-tasks").Click())
	must(t, expect.Locator(page.GetByTestId("task-row")).ToHaveCount(1))
	must(t, expect.Locator(page.GetByTestId("task-row")).ToContainText("billing.charge"))
	screenshot(t, page, "tasks-index")

	// A task no worker ran says so instead of showing zeros as if measured.
	_, err = page.Goto(base + "/tasks/never.ran")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("task-empty")).ToBeVisible())
}
