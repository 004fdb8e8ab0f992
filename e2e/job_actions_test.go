package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/redrive/redrive/store/storetest"
)

// TestKillPoisonJobFromItsPage: an operator kills a poison job that would
// otherwise retry for hours, from its page, and finds it among the dead
// letters with reason killed, its history kept and the kill recorded.
func TestKillPoisonJobFromItsPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	_, err := db.ExecContext(ctx, `INSERT INTO tasks (name) VALUES ('billing.charge') ON CONFLICT DO NOTHING`)
	must(t, err)
	var id int64
	must(t, db.GetContext(ctx, &id, `
		INSERT INTO jobs (queue, task, args, kwargs, state, attempt, max_attempts, run_at, last_error, errors, created_at, attempted_at)
		VALUES ('payments', 'billing.charge', '[4242]', '{}', 'retrying', 3, 25, now() + interval '2 hours',
			'KeyError: ''customer_id''',
			jsonb_build_array(
				jsonb_build_object('attempt', 1, 'at', now() - interval '3 hours', 'worker', 'worker-7f3a', 'version', 'v1.4.2',
					'class', 'KeyError', 'message', '''customer_id''', 'outcome', 'retry', 'retry_in_ms', 600000),
				jsonb_build_object('attempt', 2, 'at', now() - interval '2 hours', 'worker', 'worker-7f3a', 'version', 'v1.4.2',
					'class', 'KeyError', 'message', '''customer_id''', 'outcome', 'retry', 'retry_in_ms', 3600000),
				jsonb_build_object('attempt', 3, 'at', now() - interval '10 minutes', 'worker', 'worker-9c1d', 'version', 'v1.4.2',
					'class', 'KeyError', 'message', '''customer_id''', 'outcome', 'retry', 'retry_in_ms', 7200000)),
			now() - interval '3 hours', now() - interval '10 minutes')
		RETURNING id`))
	base := startServer(t, db)
	page := newPage(t)
	signInOlga(t, page, base, db)

	_, err = page.Goto(base + "/jobs?queue=payments")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("jobs-bulk")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("job-select")).ToHaveCount(1))
	screenshot(t, page, "job-actions-list-bulk-bar")

	_, err = page.Goto(fmt.Sprintf("%s/jobs/%d", base, id))
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("run-now")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("kill")).ToBeVisible())
	screenshot(t, page, "job-actions-retrying")

	must(t, page.GetByTestId("kill-reason").Fill("poison payload: no customer_id, fix in PR 812"))
	must(t, page.GetByTestId("kill").Click())
	must(t, expect.Locator(page.GetByTestId("dead-letter-link")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("job-actions")).ToHaveCount(0))
	screenshot(t, page, "job-actions-killed")

	must(t, page.GetByTestId("dead-letter-link").GetByRole("link").Click())
	must(t, expect.Locator(page.GetByTestId("why")).ToContainText("Killed by an operator after 3/25 attempts"))
	must(t, expect.Locator(page.GetByTestId("replay")).ToBeVisible())
	must(t, expect.Locator(page.Locator("body")).ToContainText("killed by olga: poison payload: no customer_id, fix in PR 812"))
	screenshot(t, page, "job-actions-letter")
}
