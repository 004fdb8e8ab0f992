package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/views"
)

// A letter's page and the actions on it: replay, edit and replay, discard,
// restore. Each action is a plain form post; success redirects (303) back
// to the letter's page, which reads the result from the audit entry the
// action wrote (?done=<entry id>), so a reload shows the same truth and the
// URL cannot claim anything the trail does not hold. A refused action
// re-renders the page with the problem where it belongs: an invalid edit
// next to its field (422), a missing reason next to the reason (400), a
// letter already replayed or discarded above the actions (409).

// AuditLister lists audit entries (a letter's own, on its page).
type AuditLister interface {
	ListAudit(ctx context.Context, f dlq.AuditFilter) (dlq.AuditPage, error)
}

// LetterActor carries out actions on one letter (replay.Service).
type LetterActor interface {
	Replay(ctx context.Context, r replay.ReplayRequest) (dlq.ReplayResult, error)
	Discard(ctx context.Context, r replay.DiscardRequest) (int64, error)
	Restore(ctx context.Context, id int64, a replay.Actor, reason, key string) (int64, error)
	VersionWarning(ctx context.Context, l dlq.DeadLetter, staleAfter time.Duration) (string, error)
	TestRun(ctx context.Context, r replay.TestRunRequest) (dlq.TestRunResult, error)
}

// LetterPage is what a letter's page and its action handlers share.
type LetterPage struct {
	// Letters reads the letter as the pages show it (masked arguments).
	Letters DeadLetterGetter
	Audit   AuditLister
	Actions LetterActor
	// TestRuns lists the letter's test jobs.
	TestRuns TestRunLister
	// LogsTemplate links each attempt to its logs (see logsURL).
	LogsTemplate string
	Version      string
}

// letterAuditLimit is how many of its own audit entries a letter's page
// shows; older ones are on the audit page.
const letterAuditLimit = 20

// DeadLetter renders one letter with its actions and its audit entries.
func DeadLetter(p LetterPage) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		d, err := getLetter(ctx, p.Letters, c.Param("id"))
		if err != nil {
			return err
		}
		var st letterFormState
		if done, err := strconv.ParseInt(c.QueryParam("done"), 10, 64); err == nil {
			st.doneID, st.repeated = done, c.QueryParam("repeat") == "1"
		}
		// ?test=1 opens the test run form (the group page's "Run one test job").
		st.test.open = c.QueryParam("test") == "1"
		return renderLetter(ctx, c, p, d, http.StatusOK, st)
	}
}

// letterFormState is what a re-rendered page keeps of a refused action.
type letterFormState struct {
	doneID   int64 // the audit entry of the action just done
	repeated bool  // that action's form had been sent before
	problem  *views.Notice
	problems map[string]string
	editOpen bool
	args     *string // as typed, for a refused edit
	kwargs   *string
	// reasons as typed, by form
	replayReason, editReason, discardReason, restoreReason string
	discardOpen                                            bool
	// the replay elsewhere or later, as typed
	targetOpen   bool
	target       targetForm
	targetReason string
	// the test run form, as typed
	test testRunForm
}

// renderLetter renders a letter's page with its actions in state st.
func renderLetter(ctx context.Context, c echo.Context, p LetterPage, d dlq.DeadLetterDetail, status int, st letterFormState) error {
	v := detailView(d, p.LogsTemplate)
	v.CrumbHref = crumbHref(c)
	meta := Meta(c, fmt.Sprintf("Dead letter %d · %s", d.ID, d.Task), "dead-letters", p.Version)
	// The letter's audit entries and the version warning are independent
	// reads: side by side, the page waits for the slower one only.
	var audit dlq.AuditPage
	var versionWarning string
	var testRuns []dlq.TestRun
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		audit, err = p.Audit.ListAudit(gctx, dlq.AuditFilter{DeadLetterID: d.ID, Limit: letterAuditLimit})
		return err
	})
	g.Go(func() (err error) {
		testRuns, err = p.TestRuns.TestRuns(gctx, d.ID, letterTestRunsLimit)
		return err
	})
	if d.Status == dlq.StatusPending && meta.CanAct {
		g.Go(func() error {
			// A warning that cannot be computed is not worth failing the page.
			if w, err := p.Actions.VersionWarning(gctx, d.DeadLetter, versionStaleAfter); err == nil {
				versionWarning = w
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, e := range audit.Entries {
		v.Audit = append(v.Audit, auditRow(e))
	}
	v.AuditMore = audit.Next != 0
	v.AuditHref = fmt.Sprintf("/audit?dead_letter_id=%d", d.ID)

	a := views.LetterActionsView{
		ID: d.ID, Status: string(d.Status), CSRFToken: meta.CSRFToken, CanAct: meta.CanAct,
		ReplayJobID: v.ReplayJobID, ReplaySource: v.Source, DeletableIn: deletableIn(d),
		ReplayByEndpoint: d.SourceKind == dlq.SourceKindHTTP, ReplayByWorkers: d.SourceKind.TakesItsReplays(),
		ReplayKey: newFormKey(), EditKey: newFormKey(), DiscardKey: newFormKey(), RestoreKey: newFormKey(), TargetKey: newFormKey(),
		TargetOpen: st.targetOpen, TargetQueue: st.target.Queue, TargetStartAt: st.target.StartAt,
		TargetMaxAttempts: st.target.MaxAttempts, TargetReason: st.targetReason,
		Queue: d.Queue, MaxAttempts: d.MaxAttempts,
		Editable: v.ArgsNote == "" && v.KwargsNote == "",
		EditOpen: st.editOpen, EditArgs: v.Args, EditKwargs: v.Kwargs,
		ReplayReason: st.replayReason, EditReason: st.editReason,
		DiscardOpen: st.discardOpen, DiscardReason: st.discardReason, RestoreReason: st.restoreReason,
		Problems: st.problems, Problem: st.problem,
	}
	if st.args != nil {
		a.EditArgs = *st.args
	}
	if ok, why := d.CanReplay(); !ok {
		a.ReplayRefused = why
	}
	if st.kwargs != nil {
		a.EditKwargs = *st.kwargs
	}
	if !a.CanAct {
		a.NoActNote = noActNote(meta.User)
	}
	if st.doneID != 0 {
		a.Result = resultNotice(audit.Entries, st.doneID, st.repeated)
	}
	a.VersionWarning = versionWarning
	v.Actions = a
	v.TestRuns = testRunsView(d, a, testRuns, st.test, st.test.open)
	if a.Result != nil && a.Result.Kind == "ok" && isTestRun(audit.Entries, st.doneID) && v.TestRuns != nil {
		// A test run's result belongs with the test jobs it starts.
		v.TestRuns.Result, v.Actions.Result = a.Result, nil
	}
	return Render(c, status, views.Layout(meta, views.DeadLetterDetail(v)))
}

func noActNote(u *views.User) string {
	if u == nil {
		return "Sign in as an operator to replay, edit, discard or restore letters."
	}
	return fmt.Sprintf("You are signed in as %s with the %s role: replaying, editing, discarding and restoring need the operator or admin role.", u.Name, u.Role)
}

// resultNotice words the action an audit entry recorded, when the entry is
// one of this letter's: the page shows it once after the redirect.
func resultNotice(entries []dlq.AuditEntry, id int64, repeated bool) *views.Notice {
	for _, e := range entries {
		if e.ID != id {
			continue
		}
		prefix := ""
		if repeated {
			prefix = "This form had already been sent, so nothing was done again. "
		}
		switch e.Action {
		case dlq.ActionReplay, dlq.ActionEditReplay:
			job := detailInt(e.Details, "replay_job_id")
			verb := "Replayed"
			if e.Action == dlq.ActionEditReplay {
				verb = "Replayed with edited arguments"
			}
			if source := detailString(e.Details, "source"); source != "" {
				// Its job runs again in its source (River), not in Redrive;
				// an HTTP source's endpoint is posted the letter shortly.
				if job := detailInt(e.Details, "source_job_id"); job != 0 {
					return &views.Notice{Kind: "ok", Message: fmt.Sprintf("%s%s: %s runs its job %d again.", prefix, verb, source, job)}
				}
				return &views.Notice{Kind: "ok", Message: fmt.Sprintf("%s%s: the letter is being sent to %s's replay endpoint, and tried again until it takes it.", prefix, verb, source)}
			}
			return &views.Notice{Kind: "ok", Message: prefix + verb + " as", LinkText: "job " + strconv.FormatInt(job, 10),
				Href: "/jobs/" + strconv.FormatInt(job, 10), After: "."}
		case dlq.ActionDiscard:
			return &views.Notice{Kind: "ok", Message: prefix + "Discarded. The letter is kept, hidden from the pending list, and can be restored."}
		case dlq.ActionRestore:
			return &views.Notice{Kind: "ok", Message: prefix + "Restored: the letter is pending again."}
		case dlq.ActionTestRun:
			return testRunNotice(e, prefix)
		}
	}
	return nil
}

// ReplayLetter handles POST /dead-letters/:id/replay: a plain replay, or,
// with edit=1, a replay with the args and kwargs typed in the editor.
func ReplayLetter(p LetterPage) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		r := replay.ReplayRequest{ID: id, Actor: ActorFrom(c), Reason: formText(c, "reason"), Key: c.FormValue("key")}
		st := letterFormState{replayReason: r.Reason}
		switch {
		case c.FormValue("edit") == "1":
			args, kwargs := c.FormValue("args"), c.FormValue("kwargs")
			r.Args, r.Kwargs = &args, &kwargs
			st = letterFormState{editOpen: true, args: &args, kwargs: &kwargs, editReason: r.Reason}
		case c.FormValue("target") == "1":
			var problems map[string]string
			r.Target, st.target, problems = formTarget(c)
			st.targetOpen, st.replayReason, st.targetReason = true, "", r.Reason
			if len(problems) > 0 {
				st.problems = problems
				return rerenderLetter(c, p, id, http.StatusUnprocessableEntity, st)
			}
		}
		res, err := p.Actions.Replay(c.Request().Context(), r)
		if err == nil {
			return redirectDone(c, id, res.AuditID, res.Repeated)
		}
		var ee *replay.EditError
		var ve *dlq.ValidationError
		switch {
		case errors.As(err, &ee):
			st.problems = map[string]string{ee.Field: ee.Message}
			return rerenderLetter(c, p, id, http.StatusUnprocessableEntity, st)
		case st.targetOpen && errors.As(err, &ve):
			st.problems = ve.Fields
			return rerenderLetter(c, p, id, http.StatusUnprocessableEntity, st)
		case errors.Is(err, dlq.ErrConflict):
			return refusedByState(c, p, id, err, st)
		}
		return err
	}
}

// DiscardLetter handles POST /dead-letters/:id/discard; a reason is required.
func DiscardLetter(p LetterPage) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		reason := formText(c, "reason")
		auditID, err := p.Actions.Discard(c.Request().Context(), replay.DiscardRequest{ID: id, Actor: ActorFrom(c), Reason: reason,
			Key: c.FormValue("key"), DeleteInSource: c.FormValue("delete_in_source") == "1"})
		if err == nil {
			return redirectDone(c, id, auditID, false)
		}
		st := letterFormState{discardOpen: true, discardReason: reason}
		var ve *dlq.ValidationError
		switch {
		case errors.As(err, &ve):
			st.problems = ve.Fields
			if len(ve.Fields) > 1 || ve.Fields["reason"] == "" {
				// The form shows a problem with the reason beside it; any
				// other (a damaged one-time key) goes above the actions.
				st.problem = &views.Notice{Kind: "error", Message: ve.Error()}
			}
			return rerenderLetter(c, p, id, http.StatusBadRequest, st)
		case errors.Is(err, dlq.ErrConflict):
			return refusedByState(c, p, id, err, st)
		}
		return err
	}
}

// RestoreLetter handles POST /dead-letters/:id/restore.
func RestoreLetter(p LetterPage) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := parseLetterID(c)
		if err != nil {
			return err
		}
		reason := formText(c, "reason")
		auditID, err := p.Actions.Restore(c.Request().Context(), id, ActorFrom(c), reason, c.FormValue("key"))
		if err == nil {
			return redirectDone(c, id, auditID, false)
		}
		if errors.Is(err, dlq.ErrConflict) {
			return refusedByState(c, p, id, err, letterFormState{restoreReason: reason})
		}
		return err
	}
}

// redirectDone sends the browser back to the letter's page (303: the
// reload of a redirected POST is a GET) naming the entry the action wrote.
func redirectDone(c echo.Context, id, auditID int64, repeated bool) error {
	u := fmt.Sprintf("/dead-letters/%d?done=%d", id, auditID)
	if repeated {
		u += "&repeat=1"
	}
	return c.Redirect(http.StatusSeeOther, u)
}

// refusedByState re-renders the page (409) saying what the letter is now:
// already replayed as job N, or discarded and to be restored first.
func refusedByState(c echo.Context, p LetterPage, id int64, err error, st letterFormState) error {
	msg, link, href, ok := stateProblem(err)
	if !ok {
		return err // another conflict: the error handler words it
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	d, err := getLetter(ctx, p.Letters, strconv.FormatInt(id, 10))
	if err != nil {
		return err
	}
	if d.ExternalID != nil && d.ReplayJobID != nil {
		// Its replay runs in its source, not in Redrive's jobs.
		link, href = "as job "+strconv.FormatInt(*d.ReplayJobID, 10)+" in "+d.Source, ""
	}
	st.problem = &views.Notice{Kind: "error", Message: msg, LinkText: link, Href: href}
	if link != "" {
		st.problem.After = "."
	}
	st.editOpen, st.discardOpen = false, false
	return renderLetter(ctx, c, p, d, http.StatusConflict, st)
}

// rerenderLetter reloads the letter (as it is now) and renders its page.
func rerenderLetter(c echo.Context, p LetterPage, id int64, status int, st letterFormState) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
	defer cancel()
	d, err := getLetter(ctx, p.Letters, strconv.FormatInt(id, 10))
	if err != nil {
		return err
	}
	return renderLetter(ctx, c, p, d, status, st)
}

// deletableIn is the source whose job a discard of d may delete too: a
// River source's; "" for any other letter.
func deletableIn(d dlq.DeadLetterDetail) string {
	if d.SourceKind == dlq.SourceKindRiver {
		return d.Source
	}
	return ""
}
