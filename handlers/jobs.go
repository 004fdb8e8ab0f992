package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// JobLister reads the job list and the filter's choices.
type JobLister interface {
	Jobs(ctx context.Context, f dlq.JobFilter) (dlq.JobPage, error)
	CountJobs(ctx context.Context, f dlq.JobFilter) (dlq.JobTotal, error)
	JobQueues(ctx context.Context) ([]string, error)
	TaskNames(ctx context.Context) ([]string, error)
	SucceededKept(ctx context.Context) (dlq.SucceededKept, error)
}

// Jobs renders the job list, filtered by the query string and paged by id.
// A bad filter value is a 400 that shows the form again, naming each bad
// parameter, so the engineer can fix it where they typed it.
func Jobs(store JobLister, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		meta := Meta(c, "Jobs", "jobs", version)
		f, err := ParseJobFilter(c.QueryParams())
		var invalid *dlq.ValidationError
		if errors.As(err, &invalid) {
			p := views.JobsPage{Filter: views.JobsFilter{
				State: c.QueryParam("state"), Queue: c.QueryParam("queue"), Task: c.QueryParam("task"),
				States: stateNames(), Active: true,
			}}
			for _, field := range slices.Sorted(maps.Keys(invalid.Fields)) {
				p.Problems = append(p.Problems, views.FieldProblem{Field: field, Message: invalid.Fields[field]})
			}
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.Jobs(p)))
		}
		if err != nil {
			return err
		}
		t := now()
		p, err := loadJobsPage(c.Request().Context(), store, f, t)
		if err != nil {
			return err
		}
		p.Pause, p.CanEnqueue = pauseLinks(meta), meta.CanAct
		markHeld(p.Rows, meta.Pauses, t)
		// Run now and kill act on waiting jobs only: a list of running,
		// finished or dead jobs gets no bar that could only select nothing.
		if meta.CanAct && (f.State == "" || f.State == dlq.StateAvailable || f.State == dlq.StateRetrying) {
			p.Bulk = jobsBulkBar(meta, f, p.Count) // job_actions.go
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.Jobs(p)))
	}
}

// loadJobsPage reads one page of jobs, their count and the filter's choices.
func loadJobsPage(ctx context.Context, store JobLister, f dlq.JobFilter, now time.Time) (views.JobsPage, error) {
	page, err := store.Jobs(ctx, f)
	if err != nil {
		return views.JobsPage{}, err
	}
	total, err := store.CountJobs(ctx, f)
	if err != nil {
		return views.JobsPage{}, err
	}
	queues, err := store.JobQueues(ctx)
	if err != nil {
		return views.JobsPage{}, err
	}
	tasks, err := store.TaskNames(ctx)
	if err != nil {
		return views.JobsPage{}, err
	}
	kept, err := store.SucceededKept(ctx)
	if err != nil {
		return views.JobsPage{}, err
	}
	p := views.JobsPage{
		Retention: retentionText(kept, now),
		Filter: views.JobsFilter{
			State: string(f.State), Queue: f.Queue, Task: f.Task,
			States: stateNames(), Queues: queues, Tasks: tasks,
			Active: f.State != "" || f.Queue != "" || f.Task != "",
		},
		Count: views.Number(total.N),
	}
	if total.Capped {
		p.Count += "+"
	}
	for _, j := range page.Jobs {
		p.Rows = append(p.Rows, jobRow(j, now))
	}
	first := f.FirstPage()
	if page.Newer != 0 {
		newer := first
		newer.After = page.Newer
		p.NewerHref = jobsHref(newer)
		p.FirstHref = jobsHref(first)
	}
	if page.Older != 0 {
		older := first
		older.Before = page.Older
		p.OlderHref = jobsHref(older)
	}
	return p, nil
}

// retentionText says how many succeeded jobs the workers' cleaner still
// keeps, and since when; "" when there are none.
func retentionText(k dlq.SucceededKept, now time.Time) string {
	if k.Oldest.IsZero() {
		return ""
	}
	kept := "Succeeded jobs are kept"
	if k.Estimate > 0 { // Postgres's estimate is 0 until the table is first analysed
		kept = fmt.Sprintf("About %s succeeded jobs are kept", views.Number(k.Estimate))
	}
	return fmt.Sprintf("%s, the oldest finished %s ago; workers delete them once past their retention (REDRIVE_RETAIN_SUCCEEDED, default 24h).",
		kept, humanDuration(now.Sub(k.Oldest)))
}

func stateNames() []string {
	names := make([]string, len(dlq.States))
	for i, s := range dlq.States {
		names[i] = string(s)
	}
	return names
}

func jobsHref(f dlq.JobFilter) string {
	if q := f.Values().Encode(); q != "" {
		return "/jobs?" + q
	}
	return "/jobs"
}

func jobRow(j dlq.JobListItem, now time.Time) views.JobRow {
	r := views.JobRow{
		ID:        j.ID,
		Href:      "/jobs/" + strconv.FormatInt(j.ID, 10),
		Queue:     j.Queue,
		Task:      j.Task,
		State:     string(j.State),
		Attempt:   fmt.Sprintf("%d/%d", j.Attempt, j.MaxAttempts),
		Created:   j.CreatedAt,
		LastError: deref(j.LastError),
	}
	switch j.State {
	case dlq.StateAvailable, dlq.StateRetrying:
		runAt := j.RunAt
		r.When = &runAt
		r.WhenLabel = "runs"
		if j.State == dlq.StateRetrying {
			r.WhenLabel = "next try"
		}
		if !runAt.After(now) {
			r.WhenLabel = "due since"
		}
	case dlq.StateRunning:
		r.When, r.WhenLabel = j.AttemptedAt, "started"
	default:
		r.When, r.WhenLabel = j.FinishedAt, "finished"
	}
	return r
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// JobReader reads one job and the dead letter it may have become.
type JobReader interface {
	Job(ctx context.Context, id int64) (dlq.Job, error)
	DeadLetterIDForJob(ctx context.Context, jobID int64) (int64, error)
}

// JobDetail renders one job: every field, its payload and attempt history,
// each attempt linked to its logs with logsTemplate (see logsURL). An
// unknown id is a 404 page.
func JobDetail(store JobReader, now func() time.Time, version, logsTemplate string) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseJobID(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		job, err := store.Job(ctx, id)
		if errors.Is(err, dlq.ErrNotFound) {
			return NotFound("No job has id %d.", id)
		}
		if err != nil {
			return err
		}
		p := jobDetailPage(job, now(), logsTemplate)
		p.Actions = jobActionsPanel(c, job, now()) // job_actions.go
		if job.State == dlq.StateDead {
			letter, err := store.DeadLetterIDForJob(ctx, job.ID)
			switch {
			case errors.Is(err, dlq.ErrNotFound):
				p.DeadLetterMissing = true
			case err != nil:
				return err
			default:
				p.DeadLetter = letter
				p.DeadLetterHref = "/dead-letters/" + strconv.FormatInt(letter, 10)
			}
		}
		meta := Meta(c, fmt.Sprintf("Job %d", job.ID), "jobs", version)
		if job.State == dlq.StateAvailable || job.State == dlq.StateRetrying {
			p.HeldBy = heldBy(meta.Pauses, job.Task, job.Queue)
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.JobDetail(p)))
	}
}

// parseID reads a positive int64 id from a path segment.
func jobDetailPage(j dlq.Job, now time.Time, logsTemplate string) views.JobDetailPage {
	p := views.JobDetailPage{
		ID:             j.ID,
		Queue:          j.Queue,
		Task:           j.Task,
		State:          string(j.State),
		Attempt:        j.Attempt,
		MaxAttempts:    j.MaxAttempts,
		IdempotencyKey: deref(j.IdempotencyKey),
		Args:           indentJSON(j.Args),
		Kwargs:         indentJSON(j.Kwargs),
		RunAt:          j.RunAt,
		CreatedAt:      j.CreatedAt,
		AttemptedAt:    j.AttemptedAt,
		FinishedAt:     j.FinishedAt,
		LeaseOwner:     deref(j.LeaseOwner),
		LeaseExpiresAt: j.LeaseExpiresAt,
		LastError:      deref(j.LastError),
		APIHref:        "/api/v1/jobs/" + strconv.FormatInt(j.ID, 10),
	}
	setRunAt(&p, j, now)
	if j.LeaseExpiresAt != nil {
		if left := j.LeaseExpiresAt.Sub(now); left >= 0 {
			p.LeaseNote = "expires in " + spanText(left)
		} else {
			p.LeaseNote, p.LeaseLate = "expired "+spanText(left)+" ago; the rescuer will hand the job back", true
		}
	}
	if j.ReplayOf != nil {
		p.ReplayOf = *j.ReplayOf
		p.ReplayOfHref = "/dead-letters/" + strconv.FormatInt(*j.ReplayOf, 10)
	}
	for _, a := range j.Errors {
		r := attemptRow(a)
		r.LogsURL = logsURL(logsTemplate, j.ID, j.Task, a)
		p.Attempts = append(p.Attempts, r)
	}
	return p
}

// heldBy is the open pause, among the banner's, that holds a waiting job
// of task on queue: its task's or its queue's.
func heldBy(pauses []views.PauseNotice, task, queue string) *views.PauseNotice {
	for _, n := range pauses {
		if (n.Kind == dlq.PauseTask && n.Name == task) || (n.Kind == dlq.PauseQueue && n.Name == queue) {
			return &n
		}
	}
	return nil
}

// markHeld says, of each due waiting job a pause holds, that it is held
// rather than merely due: "due since" alone reads as "no worker free".
func markHeld(rows []views.JobRow, pauses []views.PauseNotice, now time.Time) {
	for i := range rows {
		r := &rows[i]
		if (r.State != string(dlq.StateAvailable) && r.State != string(dlq.StateRetrying)) || r.When == nil || r.When.After(now) {
			continue
		}
		if n := heldBy(pauses, r.Task, r.Queue); n != nil {
			r.WhenLabel = "held (" + n.Kind + " paused) · due since"
		}
	}
}

// setRunAt says what run_at means for a waiting job: when its next try is,
// or that it is due and waiting for a worker.
func setRunAt(p *views.JobDetailPage, j dlq.Job, now time.Time) {
	if j.State != dlq.StateAvailable && j.State != dlq.StateRetrying {
		return
	}
	d := j.RunAt.Sub(now)
	if d <= 0 {
		p.RunAtKind = "due"
		return
	}
	p.RunAtKind, p.RunAtIn = "next", "in "+spanText(d)
	p.RunAtLabel = "next attempt"
	if j.Attempt == 0 {
		p.RunAtLabel = "first attempt"
	}
}

func attemptRow(a dlq.Attempt) views.AttemptRow {
	r := views.AttemptRow{
		N: a.Attempt, At: a.At, Worker: a.Worker, Host: a.Host, Version: a.Version,
		Class: a.Class, Message: a.Message, Traceback: a.Traceback, Logs: attemptLogs(a.Logs),
		Outcome: outcomeText(a.Outcome), Kind: string(a.Outcome),
	}
	if a.DurationMS > 0 {
		r.Duration = millis(a.DurationMS)
	}
	if a.RetryInMS > 0 {
		r.RetryIn = millis(a.RetryInMS)
	}
	return r
}

// millis writes a millisecond count: "850 ms", "4.2 s", then spanText.
func millis(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 10_000:
		return fmt.Sprintf("%.1f s", float64(ms)/1000)
	default:
		return spanText(time.Duration(ms) * time.Millisecond)
	}
}

// indentJSON indents raw for reading; what is not valid JSON is shown as is.
func indentJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
