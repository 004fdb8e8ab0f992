package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// Test runs of a letter: one job from its arguments (edited or not) on a
// queue the operator chooses, to try a fix before replaying the letter or
// its group. The letter stays pending; its page lists its test jobs and
// follows them (htmx, every second) until each succeeds or dies.

// TestRunLister lists a letter's test jobs (reads.Masked: their errors
// are masked as the letter's are).
type TestRunLister interface {
	TestRuns(ctx context.Context, id int64, limit int) ([]dlq.TestRun, error)
}

// letterTestRunsLimit is how many of its test jobs a letter's page lists:
// a handful is a trial; more are in the audit trail.
const letterTestRunsLimit = 10

// testRunForm is what a re-rendered page keeps of a refused test run.
type testRunForm struct {
	open         bool
	args, kwargs *string
	target       targetForm
	reason       string
	problems     map[string]string
	problem      *views.Notice
}

// TestRunLetter handles POST /dead-letters/:id/test-run: one test job from
// the letter's arguments as typed (or its own when the form has no
// editor), where the target fields say.
func TestRunLetter(p LetterPage) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		r := replay.TestRunRequest{ID: id, Actor: ActorFrom(c), Reason: formText(c, "reason"), Key: c.FormValue("key")}
		form := testRunForm{open: true, reason: r.Reason}
		if params, err := c.FormParams(); err == nil {
			if _, ok := params["args"]; ok {
				args, kwargs := c.FormValue("args"), c.FormValue("kwargs")
				r.Args, r.Kwargs, form.args, form.kwargs = &args, &kwargs, &args, &kwargs
			}
		}
		var problems map[string]string
		r.Target, form.target, problems = formTarget(c)
		if len(problems) > 0 {
			form.problems = problems
			return rerenderLetter(c, p, id, http.StatusUnprocessableEntity, letterFormState{test: form})
		}
		res, err := p.Actions.TestRun(c.Request().Context(), r)
		if err == nil {
			u := fmt.Sprintf("/dead-letters/%d?done=%d", id, res.AuditID)
			if res.Repeated {
				u += "&repeat=1"
			}
			return c.Redirect(http.StatusSeeOther, u+"#test-runs")
		}
		return testRunRefused(c, p, id, err, form)
	}
}

// testRunRefused re-renders the page with the test run form open and the
// problem beside its field, or above the form when it is no field's (the
// letter's task no longer registered, another system's letter).
func testRunRefused(c echo.Context, p LetterPage, id int64, err error, form testRunForm) error {
	var ee *replay.EditError
	var ve *dlq.ValidationError
	var de *dlq.Error
	status := http.StatusUnprocessableEntity
	switch {
	case errors.As(err, &ee):
		form.problems = map[string]string{ee.Field: ee.Message}
	case errors.As(err, &ve):
		form.problems = ve.Fields
		for field, msg := range ve.Fields {
			if !testRunFields[field] {
				form.problem = &views.Notice{Kind: "error", Message: field + ": " + msg}
			}
		}
	case errors.Is(err, dlq.ErrConflict) && errors.As(err, &de):
		status, form.problem = http.StatusConflict, &views.Notice{Kind: "error", Message: de.Message}
	default:
		return err
	}
	return rerenderLetter(c, p, id, status, letterFormState{test: form})
}

// testRunFields are the test run form's fields beside which their
// problems are shown; any other (the reason's length, the letter's task
// no longer registered) goes above the form.
var testRunFields = map[string]bool{"args": true, "kwargs": true, "queue": true, "start_at": true, "max_attempts": true}

// LetterTestRuns handles GET /dead-letters/:id/test-runs: the list of the
// letter's test jobs alone, which the page polls while one is unfinished.
func LetterTestRuns(runs TestRunLister) echo.HandlerFunc {
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
		return Render(c, http.StatusOK, views.TestRunJobs(testRunList(id, list)))
	}
}

// testRunsView is a letter's test runs panel: nil when there is nothing
// to show (no test job, and the requester may not run one).
func testRunsView(d dlq.DeadLetterDetail, a views.LetterActionsView, runs []dlq.TestRun, form testRunForm, open bool) *views.TestRunsView {
	if !a.CanAct && len(runs) == 0 {
		return nil
	}
	v := &views.TestRunsView{
		LetterID: d.ID, CSRFToken: a.CSRFToken, Key: newFormKey(), CanAct: a.CanAct,
		Open: open, Editable: a.Editable, Args: a.EditArgs, Kwargs: a.EditKwargs,
		Reason: form.reason, Problems: form.problems, Result: form.problem, DefaultQueue: d.Queue,
		Target: views.ReplayTargetView{Prefix: "test", Queue: form.target.Queue, StartAt: form.target.StartAt,
			MaxAttempts: form.target.MaxAttempts, DefaultQueue: d.Queue, DefaultAttempts: dlq.TestRunMaxAttempts,
			Problems: form.problems},
		Runs: testRunList(d.ID, runs),
	}
	if d.ExternalID != nil {
		v.Refused = "This letter came from " + d.Source + ", whose workers run its task: a test job cannot run it here. Replay it there instead."
	}
	if form.args != nil {
		v.Args = *form.args
	}
	if form.kwargs != nil {
		v.Kwargs = *form.kwargs
	}
	return v
}

// testRunList maps a letter's test jobs to the live list.
func testRunList(id int64, runs []dlq.TestRun) views.TestRunList {
	l := views.TestRunList{PollURL: fmt.Sprintf("/dead-letters/%d/test-runs", id)}
	for _, r := range runs {
		row := views.TestRunRow{JobID: r.JobID, Queue: r.Queue, State: string(r.State), Attempt: r.Attempt,
			MaxAttempts: r.MaxAttempts, RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt}
		if r.State == "" {
			row.State, row.LastError = "gone", "finished and since removed by the cleaner"
		}
		if r.LastError != nil {
			row.LastError = *r.LastError
		}
		if r.DiedAsLetter != nil {
			row.DiedAsLetter = *r.DiedAsLetter
		}
		l.Live = l.Live || !r.Settled()
		l.Runs = append(l.Runs, row)
	}
	return l
}

// testRunNotice words a test run's audit entry after the redirect.
func testRunNotice(e dlq.AuditEntry, prefix string) *views.Notice {
	job, attempts := detailInt(e.Details, "test_job_id"), detailInt(e.Details, "max_attempts")
	return &views.Notice{Kind: "ok", Message: prefix + "Test job", LinkText: strconv.FormatInt(job, 10),
		Href: "/jobs/" + strconv.FormatInt(job, 10),
		After: fmt.Sprintf(" enqueued on queue %s with at most %d %s; it is followed below. This letter is unchanged: a test run replays nothing.",
			detailString(e.Details, "queue"), attempts, plural(int(attempts), "attempt", "attempts"))}
}

// isTestRun reports whether the entry id among entries is a test run.
func isTestRun(entries []dlq.AuditEntry, id int64) bool {
	for _, e := range entries {
		if e.ID == id {
			return e.Action == dlq.ActionTestRun
		}
	}
	return false
}
