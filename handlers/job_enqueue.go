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

// The jobs page's "Enqueue a job": one job typed in by an operator, its
// task chosen from those the workers registered, audited. Producers
// enqueue through POST /api/v1/jobs; this is the console's hand tool.

// HandEnqueuer enqueues a job an operator typed in (replay.JobService).
type HandEnqueuer interface {
	Enqueue(ctx context.Context, r replay.EnqueueRequest) (dlq.EnqueueJobResult, error)
}

// TaskNamer lists the registered tasks, the task field's choices.
type TaskNamer interface {
	TaskNames(ctx context.Context) ([]string, error)
}

// enqueueFields are the form's fields, beside which their problems show.
var enqueueFields = map[string]bool{"task": true, "queue": true, "args": true, "kwargs": true, "max_attempts": true, "run_at": true, "reason": true}

// EnqueuePage handles GET /jobs/new: the empty form (task and queue may
// be given in the query string).
func EnqueuePage(tasks TaskNamer, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayAct(c); err != nil {
			return err
		}
		f := views.EnqueueForm{Task: c.QueryParam("task"), Queue: c.QueryParam("queue")}
		return renderEnqueue(c, tasks, version, http.StatusOK, f)
	}
}

// EnqueueJob handles POST /jobs/new: 303 to the new job's page, or the
// form again with each problem beside its field (422).
func EnqueueJob(tasks TaskNamer, svc HandEnqueuer, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f := views.EnqueueForm{Task: formText(c, "task"), Queue: formText(c, "queue"), Args: c.FormValue("args"),
			Kwargs: c.FormValue("kwargs"), MaxAttempts: formText(c, "max_attempts"), RunAt: formText(c, "run_at"),
			Reason: formText(c, "reason")}
		job, problems := enqueueParams(f)
		if len(problems) > 0 {
			f.Problems = problems
			return renderEnqueue(c, tasks, version, http.StatusUnprocessableEntity, f)
		}
		res, err := svc.Enqueue(c.Request().Context(), replay.EnqueueRequest{Job: job, Args: f.Args, Kwargs: f.Kwargs,
			Actor: ActorFrom(c), Reason: f.Reason, Key: c.FormValue("key")})
		if err == nil {
			return c.Redirect(http.StatusSeeOther, fmt.Sprintf("/jobs/%d", res.JobID))
		}
		var ee *replay.EditError
		var ve *dlq.ValidationError
		switch {
		case errors.As(err, &ee):
			f.Problems = map[string]string{ee.Field: ee.Message}
		case errors.As(err, &ve):
			f.Problems = ve.Fields
			for field, msg := range ve.Fields {
				if !enqueueFields[field] {
					f.Problem = &views.Notice{Kind: "error", Message: field + ": " + msg}
				}
			}
		default:
			return err
		}
		return renderEnqueue(c, tasks, version, http.StatusUnprocessableEntity, f)
	}
}

// enqueueParams reads the typed max attempts and run at; args and kwargs
// are the service's to check, the rest the store's.
func enqueueParams(f views.EnqueueForm) (dlq.EnqueueParams, map[string]string) {
	job := dlq.EnqueueParams{Task: f.Task, Queue: f.Queue}
	problems := map[string]string{}
	if f.MaxAttempts != "" {
		n, err := strconv.Atoi(f.MaxAttempts)
		if err != nil {
			problems["max_attempts"] = fmt.Sprintf("%q is not a whole number", f.MaxAttempts)
		}
		job.MaxAttempts = n
	}
	// A run at is read as a replay's start is: UTC, from a datetime-local
	// field or RFC 3339.
	t, targetProblems := parseTarget(targetForm{StartAt: f.RunAt})
	if p := targetProblems["start_at"]; p != "" {
		problems["run_at"] = p
	}
	job.RunAt = t.StartAt
	return job, problems
}

// renderEnqueue renders the form with the registered tasks as choices.
func renderEnqueue(c echo.Context, tasks TaskNamer, version string, status int, f views.EnqueueForm) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	names, err := tasks.TaskNames(ctx)
	if err != nil {
		return err
	}
	meta := Meta(c, "Enqueue a job", "jobs", version)
	f.Tasks, f.CSRFToken, f.Key = names, meta.CSRFToken, newFormKey()
	return Render(c, status, views.Layout(meta, views.EnqueuePage(f)))
}
