package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

func TestJobsFilterAndDetail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	var retrying int64
	_, err := db.ExecContext(ctx, `
		INSERT INTO jobs (queue, task, args, kwargs, state, attempt, run_at, lease_owner, lease_expires_at, attempted_at, finished_at)
		SELECT (ARRAY['default', 'payments', 'email'])[1 + g % 3], (ARRAY['billing.charge', 'mail.send', 'reports.build'])[1 + g % 3],
			jsonb_build_array(g), '{}', s, CASE WHEN s = 'available' THEN 0 ELSE 1 END, now(),
			CASE WHEN s = 'running' THEN 'worker-7f3a' END, CASE WHEN s = 'running' THEN now() + interval '30 seconds' END,
			CASE WHEN s <> 'available' THEN now() END, CASE WHEN s IN ('succeeded', 'dead') THEN now() END
		FROM (SELECT g, (ARRAY['succeeded', 'succeeded', 'available', 'dead', 'running'])[1 + g % 5] AS s
			FROM generate_series(1, 60) g) x`)
	must(t, err)
	// A job that failed twice, 40 and 6 seconds ago, and waits 40 seconds
	// for its third try.
	must(t, db.GetContext(ctx, &retrying, `
		INSERT INTO jobs (queue, task, args, kwargs, state, attempt, max_attempts, run_at, last_error, errors, created_at, attempted_at)
		VALUES ('payments', 'billing.charge', '[4242, {"order": "A-17", "amount": 1999}]', '{"currency": "EUR", "retry": true}',
			'retrying', 2, 5, now() + interval '40 seconds', 'ConnectionResetError: connection reset by peer',
			jsonb_build_array(
				jsonb_build_object('attempt', 1, 'at', now() - interval '75 seconds', 'worker', 'worker-7f3a', 'host', 'ip-10-0-1-17',
					'version', 'v1.4.2', 'class', 'TimeoutError', 'message', 'upstream timed out after 30s', 'outcome', 'retry',
					'retry_in_ms', 4000, 'duration_ms', 30012, 'traceback', E'Traceback (most recent call last):\n  File "billing.py", line 42, in charge\n    resp = client.post(url)\nTimeoutError: upstream timed out after 30s'),
				jsonb_build_object('attempt', 2, 'at', now() - interval '6 seconds', 'worker', 'worker-9c1d', 'host', 'ip-10-0-1-18',
					'version', 'v1.4.2', 'class', 'ConnectionResetError', 'message', 'connection reset by peer', 'outcome', 'retry',
					'retry_in_ms', 40000, 'duration_ms', 118)),
			now() - interval '2 minutes', now() - interval '6 seconds')
		RETURNING id`))
	base := startServer(t, db)
	page := newPage(t)
	signIn(t, page, base, db, dlq.RoleViewer)

	_, err = page.Goto(base + "/jobs")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("job-row")).ToHaveCount(50))
	must(t, expect.Locator(page.GetByTestId("jobs-count")).ToContainText("61 jobs"))
	screenshot(t, page, "jobs-list")

	// Filter to retrying payments jobs: one row, and the URL says so.
	_, err = page.GetByTestId("filter-state").SelectOption(playwright.SelectOptionValues{Values: &[]string{"retrying"}})
	must(t, err)
	must(t, page.GetByTestId("filter-queue").Fill("payments"))
	must(t, page.GetByTestId("filter-submit").Click())
	must(t, expect.Page(page).ToHaveURL(base+"/jobs?state=retrying&queue=payments&task="))
	must(t, expect.Locator(page.GetByTestId("job-row")).ToHaveCount(1))
	must(t, expect.Locator(page.GetByTestId("jobs-count")).ToContainText("1 matching job"))

	// The row opens the job: next attempt, history, payload.
	must(t, page.GetByTestId("job-link").Click())
	must(t, expect.Page(page).ToHaveURL(fmt.Sprintf("%s/jobs/%d", base, retrying)))
	must(t, expect.Locator(page.GetByTestId("job-attempt")).ToHaveText("2 of 5"))
	must(t, expect.Locator(page.GetByTestId("run-at-note")).ToHaveText("next attempt"))
	must(t, expect.Locator(page.GetByTestId("attempt")).ToHaveCount(2))
	must(t, expect.Locator(page.GetByTestId("job-args")).ToContainText(`"order": "A-17"`))
	screenshot(t, page, "job-detail")

	// Paging: the second page of all jobs starts below the first.
	_, err = page.Goto(base + "/jobs")
	must(t, err)
	must(t, page.GetByTestId("page-older").Click())
	must(t, expect.Locator(page.GetByTestId("job-row")).ToHaveCount(11))
	must(t, expect.Locator(page.GetByTestId("page-newer")).ToBeVisible())
}
