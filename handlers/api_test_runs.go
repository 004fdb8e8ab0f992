package handlers

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
)

// TestRunner runs one test job for a letter (replay.Service).
type TestRunner interface {
	TestRun(ctx context.Context, r replay.TestRunRequest) (dlq.TestRunResult, error)
}

// testRunBody is a test run's request: edited args and kwargs, and where,
// from when and with how many attempts the test job runs; all optional.
type testRunBody struct {
	replayBody
}

// TestRunJSON answers a test run.
type TestRunJSON struct {
	TestJobID    int64 `json:"test_job_id"`
	AuditEventID int64 `json:"audit_event_id"`
	// Repeated: the Idempotency-Key had been used; this is the first answer.
	Repeated bool `json:"repeated"`
}

// APITestRun answers POST /api/v1/dead-letters/{id}/test-runs with body
// {args?, kwargs?, queue?, start_at?, max_attempts?, reason?}: one test job
// of the letter's task (201), which leaves the letter as it is.
func APITestRun(svc TestRunner) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		var b testRunBody
		if err := decodeOptionalJSON(c, &b, "args, kwargs, reason, queue, start_at, max_attempts"); err != nil {
			return err
		}
		res, err := svc.TestRun(c.Request().Context(), replay.TestRunRequest{ID: id, Actor: ActorFrom(c),
			Args: rawText(b.Args), Kwargs: rawText(b.Kwargs), Reason: b.Reason, Target: b.target(),
			Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		status := http.StatusCreated
		if res.Repeated {
			status = http.StatusOK
		}
		return c.JSON(status, TestRunJSON{TestJobID: res.JobID, AuditEventID: res.AuditID, Repeated: res.Repeated})
	}
}

// TestRunsJSON lists a letter's test jobs, newest first.
type TestRunsJSON struct {
	TestRuns []dlq.TestRun `json:"test_runs"`
}

// APITestRuns answers GET /api/v1/dead-letters/{id}/test-runs: the letter's
// newest test jobs as they are now, to follow one until it settles.
func APITestRuns(runs TestRunLister) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		list, err := runs.TestRuns(ctx, id, letterTestRunsLimit)
		if err != nil {
			return err
		}
		if list == nil {
			list = []dlq.TestRun{}
		}
		return c.JSON(http.StatusOK, TestRunsJSON{TestRuns: list})
	}
}
