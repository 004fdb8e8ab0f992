package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// Actions on live jobs: run now, kill and cancel from a job's page, run now
// and kill in bulk from the list (a confirmation page first, which changes
// nothing), and the same as JSON. Each form carries the state and attempt
// its page showed; the store refuses the action when the job moved on, and
// the page says what it is now (409).

// JobActor is what the job actions need (replay.JobService).
type JobActor interface {
	Act(ctx context.Context, r replay.JobRequest) (dlq.JobActionResult, error)
	ActOnMany(ctx context.Context, r replay.BulkJobRequest) (dlq.BulkJobResult, error)
	PreviewJobs(ctx context.Context, a dlq.JobAction, sel dlq.JobSelection, sampleSize int) (dlq.JobPreview, error)
}

// mayActOnJobs refuses viewers before anything is read.
func mayActOnJobs(c echo.Context) error {
	a := ActorFrom(c)
	if a.Role.CanAct() {
		return nil
	}
	role := string(a.Role)
	if role == "" {
		role = "anonymous"
	}
	return &dlq.Error{Code: "forbidden",
		Message: "You may not do this: acting on jobs needs the operator or admin role, and you are " + role + "."}
}

// jobActionsPanel is the action panel for job j as the page shows it now.
func jobActionsPanel(c echo.Context, j dlq.Job, now time.Time) *views.JobActionsView {
	if j.State == dlq.StateSucceeded || j.State == dlq.StateDead {
		return nil
	}
	meta := Meta(c, "", "", "")
	waiting := j.State == dlq.StateAvailable || j.State == dlq.StateRetrying
	a := &views.JobActionsView{ID: j.ID, State: string(j.State), Attempt: j.Attempt, CSRFToken: meta.CSRFToken,
		CanAct: meta.CanAct, CanRunNow: waiting && j.RunAt.After(now), CanKill: waiting, CanCancel: j.State == dlq.StateRunning,
		RunNowKey: newFormKey(), KillKey: newFormKey(), CancelKey: newFormKey()}
	if !a.CanAct {
		a.NoActNote = "Running it now, killing or cancelling it needs the operator role."
	}
	switch c.QueryParam("done") {
	case "run_now":
		a.Result = &views.Notice{Kind: "ok", Message: "Done: its next attempt starts as soon as a worker is free."}
	case "cancel":
		a.Result = &views.Notice{Kind: "ok", Message: "Cancel requested: the worker holding it has been told; reload to see it stop."}
	}
	return a
}

// jobsBulkBar is the list's bulk form for filter f.
func jobsBulkBar(meta views.PageMeta, f dlq.JobFilter, count string) *views.JobsBulkView {
	f = f.FirstPage()
	f.Limit = 0
	return &views.JobsBulkView{CSRFToken: meta.CSRFToken, FilterQuery: f.Values().Encode(), Count: count}
}

// JobActionHandler answers POST /jobs/:id/{run-now,kill,cancel} from the
// job's page: success redirects back to the page (303), a job that moved
// on or a bad reason shows the page again with the problem (409, 422).
func JobActionHandler(store JobReader, svc JobActor, action dlq.JobAction, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayActOnJobs(c); err != nil {
			return err
		}
		id, err := parseJobID(c)
		if err != nil {
			return err
		}
		r := replay.JobRequest{Action: action, ID: id, Actor: ActorFrom(c), Reason: c.FormValue("reason"),
			Retry: c.FormValue("retry") == "1", Key: c.FormValue("key"), SeenState: dlq.State(c.FormValue("seen_state"))}
		if s := c.FormValue("seen_attempt"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return BadRequest("invalid_form", "The form's attempt is damaged; reload the page and try again.")
			}
			r.SeenAttempt = &n
		}
		if r.SeenState == "" || r.SeenAttempt == nil {
			return BadRequest("invalid_form", "The form lacks the state the page showed; reload the page and try again.")
		}
		if action == dlq.JobKill && r.Reason == "" {
			return jobPageProblem(c, store, id, now, version, http.StatusUnprocessableEntity,
				"A reason is required to kill a job: the next person will ask why it was dropped.")
		}
		res, err := svc.Act(c.Request().Context(), r)
		var se *dlq.JobStateError
		var ve *dlq.ValidationError
		switch {
		case errors.As(err, &se):
			return jobPageProblem(c, store, id, now, version, http.StatusConflict, capitalise(se.Error())+".")
		case errors.As(err, &ve):
			return jobPageProblem(c, store, id, now, version, http.StatusUnprocessableEntity, ve.Error())
		case err != nil:
			return err
		}
		href := "/jobs/" + strconv.FormatInt(res.JobID, 10)
		if action != dlq.JobKill {
			href += "?done=" + string(action)
		}
		return c.Redirect(http.StatusSeeOther, href)
	}
}

// jobPageProblem shows the job's page as it is now with a problem above
// its actions.
func jobPageProblem(c echo.Context, store JobReader, id int64, now func() time.Time, version string, status int, msg string) error {
	job, err := store.Job(c.Request().Context(), id)
	if errors.Is(err, dlq.ErrNotFound) {
		return NotFound("No job has id %d.", id)
	}
	if err != nil {
		return err
	}
	// The attempts' links to the team's logs are left out of this
	// re-rendering, whose point is the problem; the lines kept show.
	p := jobDetailPage(job, now(), "")
	p.Actions = jobActionsPanel(c, job, now())
	if p.Actions == nil {
		p.Actions = &views.JobActionsView{ID: job.ID, State: string(job.State), CanAct: true}
	}
	p.Actions.Problem = &views.Notice{Kind: "error", Message: msg}
	if job.State == dlq.StateDead {
		if letter, err := store.DeadLetterIDForJob(c.Request().Context(), job.ID); err == nil {
			p.DeadLetter, p.DeadLetterHref = letter, "/dead-letters/"+strconv.FormatInt(letter, 10)
		}
	}
	return Render(c, status, views.Layout(Meta(c, fmt.Sprintf("Job %d", job.ID), "jobs", version), views.JobDetail(p)))
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// jobBulkForm is what the list's bulk form and the confirmation carry.
type jobBulkForm struct {
	action      dlq.JobAction
	sel         dlq.JobSelection
	allMatching bool
	filter      dlq.JobFilter
	reason      string
	typed       string
	key         string
}

func parseJobBulkForm(c echo.Context) (jobBulkForm, error) {
	form, err := c.FormParams()
	if err != nil {
		return jobBulkForm{}, BadRequest("invalid_form", "The form could not be read: %v", err)
	}
	b := jobBulkForm{action: dlq.JobAction(form.Get("action")), reason: form.Get("reason"), typed: form.Get("typed"), key: form.Get("key")}
	if b.action != dlq.JobRunNow && b.action != dlq.JobKill {
		return jobBulkForm{}, BadRequest("invalid_action", "Choose run now or kill.")
	}
	if form.Get("all_matching") == "1" {
		q, err := url.ParseQuery(form.Get("filter"))
		if err != nil {
			return jobBulkForm{}, BadRequest("invalid_filter", "The filter of this form could not be read; go back to the list and try again.")
		}
		f, err := ParseJobFilter(q)
		if err != nil {
			return jobBulkForm{}, err
		}
		f = f.FirstPage()
		f.Limit = 0
		b.allMatching, b.filter, b.sel.Filter = true, f, &f
	} else {
		if b.sel.IDs, err = selectedIDs(form["id"], "Job",
			"Nothing was selected: tick some waiting jobs, or “Select all … matching this filter”, then choose run now or kill."); err != nil {
			return jobBulkForm{}, err
		}
	}
	if b.sel.MaxID, err = formBound(form.Get("max_id")); err != nil {
		return jobBulkForm{}, err
	}
	return b, nil
}

// JobsBulkConfirmPage renders the confirmation of a bulk action on jobs
// (POST /jobs/bulk). It changes nothing.
func JobsBulkConfirmPage(svc JobActor, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayActOnJobs(c); err != nil {
			return err
		}
		b, err := parseJobBulkForm(c)
		if err != nil {
			return err
		}
		b.sel.MaxID = 0 // a new confirmation fixes a new bound
		return renderJobsConfirm(c, svc, b, http.StatusOK, nil, version)
	}
}

// JobsBulkConfirm carries out the confirmed bulk action (POST
// /jobs/bulk/confirm) and shows what it did; a problem shows the
// confirmation again with the problem named, nothing done.
func JobsBulkConfirm(svc JobActor, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayActOnJobs(c); err != nil {
			return err
		}
		b, err := parseJobBulkForm(c)
		if err != nil {
			return err
		}
		if b.sel.MaxID == 0 {
			return BadRequest("invalid_bound", "This confirmation has no bound; go back to the list and select again.")
		}
		problems := map[string]string{}
		if b.action == dlq.JobKill && b.reason == "" {
			problems["reason"] = "A reason is required to kill jobs: the next person will ask why they were dropped."
		} else {
			res, err := svc.ActOnMany(c.Request().Context(), replay.BulkJobRequest{Action: b.action, Selection: b.sel,
				Actor: ActorFrom(c), Reason: b.reason, RequireTyped: true, Typed: b.typed, Key: b.key})
			var ve *dlq.ValidationError
			var ce *replay.ConfirmError
			switch {
			case err == nil:
				return renderJobsDone(c, b, res, version)
			case errors.As(err, &ce):
				problems["typed"] = fmt.Sprintf("Type the number %d exactly to confirm; “%s” is not it.", ce.Expected, b.typed)
			case errors.As(err, &ve):
				for k, v := range ve.Fields {
					problems[k] = k + " " + v
				}
			default:
				return err
			}
		}
		return renderJobsConfirm(c, svc, b, http.StatusBadRequest, problems, version)
	}
}

func jobsVerb(a dlq.JobAction) string {
	if a == dlq.JobKill {
		return "Kill"
	}
	return "Run now"
}

func renderJobsConfirm(c echo.Context, svc JobActor, b jobBulkForm, status int, problems map[string]string, version string) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	p, err := svc.PreviewJobs(ctx, b.action, b.sel, bulkSampleSize)
	if err != nil {
		return err
	}
	verb := jobsVerb(b.action)
	meta := Meta(c, verb+" jobs", "jobs", version)
	// The bound the form carries stays; a first confirmation takes the
	// newest job that matched now.
	maxID := b.sel.MaxID
	if maxID == 0 {
		maxID = p.MaxID
	}
	v := views.JobBulkConfirmView{Action: string(b.action), Verb: verb, CSRFToken: meta.CSRFToken, Key: newFormKey(),
		AllMatching: b.allMatching, IDs: b.sel.IDs, MaxID: maxID, Matched: p.Matched, MatchedText: views.Number(p.Matched),
		Capped: p.Capped, NeedTyped: p.Matched > replay.TypedConfirmationOver, Typed: b.typed, Reason: b.reason,
		Problems: problems, BackHref: "/jobs"}
	now := time.Now()
	for _, j := range p.Sample {
		v.Sample = append(v.Sample, jobRow(j, now))
	}
	if b.allMatching {
		v.FilterQuery = b.filter.Values().Encode()
		v.Selection = "every waiting job matching " + jobFilterWords(b.filter)
		v.BackHref = jobsHref(b.filter)
	} else {
		v.Selection = fmt.Sprintf("of the %s %s you ticked, those still waiting", views.Number(int64(len(b.sel.IDs))), plural(len(b.sel.IDs), "job", "jobs"))
	}
	return Render(c, status, views.Layout(meta, views.JobBulkConfirm(v)))
}

func jobFilterWords(f dlq.JobFilter) string {
	words := ""
	add := func(k, v string) {
		if v == "" {
			return
		}
		if words != "" {
			words += ", "
		}
		words += k + " " + v
	}
	add("state", string(f.State))
	add("queue", f.Queue)
	add("task", f.Task)
	if words == "" {
		return "no filter (every queue and task)"
	}
	return words
}

func renderJobsDone(c echo.Context, b jobBulkForm, res dlq.BulkJobResult, version string) error {
	verb := jobsVerb(b.action)
	v := views.JobBulkDoneView{Verb: verb, Action: string(b.action), Changed: views.Number(res.Changed),
		Skipped: views.Number(res.Skipped), BackHref: "/jobs"}
	if b.allMatching {
		v.BackHref = jobsHref(b.filter)
	}
	if b.action == dlq.JobKill && res.Changed > 0 {
		v.LettersHref = "/dead-letters?reason=killed"
	}
	return Render(c, http.StatusOK, views.Layout(Meta(c, verb+" jobs", "jobs", version), views.JobBulkDone(v)))
}
