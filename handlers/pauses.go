package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// Pauses in the console and the API. Pausing and resuming need the
// operator role (the access rules refuse other roles first; the handlers
// check again). A queue or task already paused is a 409 naming the open
// pause: the second pauser learns who paused it, why and until when,
// rather than silently taking the pause over. Resuming a pause that has
// ended is a 409 saying how it ended.

// PauseStore is what the pause pages and endpoints need (store/queue).
type PauseStore interface {
	PauseWork(ctx context.Context, p dlq.PauseParams) (dlq.PauseResult, error)
	ResumeWork(ctx context.Context, p dlq.ResumeParams) (dlq.PauseResult, error)
	OpenPauses(ctx context.Context) ([]dlq.Pause, bool, error)
	ExpirePauses(ctx context.Context, now time.Time) ([]dlq.Pause, error)
	PausesWithBacklog(ctx context.Context) ([]dlq.ActivePause, error)
	RecentPauses(ctx context.Context, limit int) ([]dlq.Pause, error)
	// The pauses page lists the throttles too (throttles.go).
	ThrottlesWithWork(ctx context.Context) ([]dlq.ActiveThrottle, error)
	RecentThrottles(ctx context.Context, limit int) ([]dlq.Throttle, error)
}

const pausesKey = "redrive.pauses"

// pauseBannerTimeout bounds the banner's read: a page is worth more than
// its banner when the database is slow.
const pauseBannerTimeout = 2 * time.Second

// PauseBanner loads the open pauses for the banner of every page: GETs of
// pages by someone signed in, not the API, assets or htmx fragments. It
// reads only the small pauses table. A pause whose time ran out is
// recorded here when no worker has done it yet (dlq.ExpirePauses, guarded:
// written once whoever notices first). The read is kept for a moment by
// banners. A failed read leaves the banner out rather than failing the
// page.
func PauseBanner(store PauseStore, now func() time.Time, banners *Banners) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			path := r.URL.Path
			if r.Method != http.MethodGet || IsHTMX(c) || strings.HasPrefix(path, "/api/") ||
				strings.HasPrefix(path, "/static/") || strings.HasSuffix(path, ".csv") || strings.HasSuffix(path, ".json") {
				return next(c)
			}
			if _, ok := principal.From(c); !ok {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(r.Context(), pauseBannerTimeout)
			defer cancel()
			open, lapsed, err := banners.openPauses(ctx, store)
			if err == nil && lapsed {
				_, _ = store.ExpirePauses(ctx, now()) // best effort: the claim ignores lapsed pauses anyway
				banners.changed()
			}
			if err == nil {
				notices := make([]views.PauseNotice, len(open))
				for i, p := range open {
					notices[i] = pauseNotice(p)
				}
				c.Set(pausesKey, notices)
			}
			return next(c)
		}
	}
}

func pauseNotice(p dlq.Pause) views.PauseNotice {
	return views.PauseNotice{ID: p.ID, Kind: p.Kind, Name: p.Name, By: p.PausedBy, Since: p.PausedAt,
		Reason: p.Reason, Until: p.Until, JobsHref: "/jobs?" + url.Values{p.Kind: {p.Name}}.Encode()}
}

// pauseLinks is what a list page needs to offer pause links.
func pauseLinks(meta views.PageMeta) *views.PauseLinks {
	return &views.PauseLinks{CanAct: meta.CanAct, Open: meta.Pauses, Throttled: meta.Throttles}
}

// openPauseOf returns the banner's pause of kind and name, if one is open.
func openPauseOf(c echo.Context, kind, name string) *views.PauseNotice {
	notices, _ := c.Get(pausesKey).([]views.PauseNotice)
	for _, n := range notices {
		if n.Kind == kind && n.Name == name {
			return &n
		}
	}
	return nil
}

// defaultPauseFor is how long a pause holds unless its form says
// otherwise, wherever the form is opened (a task's link, the pauses page):
// an hour, so that a pause made in a hurry is never forgotten; holding
// until someone resumes it is one choice away.
const defaultPauseFor = "1h"

// pauseDurations are the form's choices of "resume by itself after".
var pauseDurations = []views.Option{
	{Value: "", Label: "no: until someone resumes it"},
	{Value: "15m", Label: "15 minutes"}, {Value: "30m", Label: "30 minutes"}, {Value: "1h", Label: "1 hour"},
	{Value: "2h", Label: "2 hours"}, {Value: "4h", Label: "4 hours"}, {Value: "8h", Label: "8 hours"},
	{Value: "24h", Label: "24 hours"},
}

// parseExpiry reads when a pause should end by itself: forText is a
// duration ("30m", "2h"), untilText a time of day in UTC ("14:30": today,
// or tomorrow if that has passed) or an RFC 3339 timestamp. Both empty: no
// expiry. It returns the problem in words, keyed by field.
func parseExpiry(now time.Time, forText, untilText string) (*time.Time, map[string]string) {
	forText, untilText = strings.TrimSpace(forText), strings.TrimSpace(untilText)
	switch {
	case forText != "" && untilText != "":
		return nil, map[string]string{"until": "give either a duration (for) or a time (until), not both"}
	case forText != "":
		d, err := time.ParseDuration(forText)
		if err != nil || d <= 0 {
			return nil, map[string]string{"for": fmt.Sprintf("%q is not a duration: write it like 30m, 2h or 1h30m", forText)}
		}
		t := now.Add(d)
		return &t, nil
	case untilText != "":
		if t, err := time.Parse(time.RFC3339, untilText); err == nil {
			return &t, nil
		}
		clock, err := time.Parse("15:04", untilText)
		if err != nil {
			return nil, map[string]string{"until": fmt.Sprintf("%q is not a time: write a time of day in UTC like 14:30, or a timestamp like 2026-12-01T14:30:00Z", untilText)}
		}
		n := now.UTC()
		t := time.Date(n.Year(), n.Month(), n.Day(), clock.Hour(), clock.Minute(), 0, 0, time.UTC)
		if !t.After(n) {
			t = t.AddDate(0, 0, 1)
		}
		return &t, nil
	}
	return nil, nil
}

// expiryField names the field an expiry was given in, for its problems
// (dlq.PauseParams.UntilField).
func expiryField(forText string) string {
	if strings.TrimSpace(forText) != "" {
		return "for"
	}
	return "until"
}

// expiryAsSent is the expiry as the request wrote it, for the request's
// idempotency key (dlq.PauseParams.Expiry): empty when there is none.
func expiryAsSent(forText, untilText string) string {
	forText, untilText = strings.TrimSpace(forText), strings.TrimSpace(untilText)
	if forText == "" && untilText == "" {
		return ""
	}
	return "for " + forText + ", until " + untilText
}

// mayPause refuses a requester who may not pause or resume.
func mayPause(c echo.Context) error {
	if ActorFrom(c).Role.CanAct() {
		return nil
	}
	return dlq.Errorf(dlq.EForbidden, "You may not do this: pausing and resuming need the operator or admin role")
}

// PausesPage renders /pauses: what is paused, the pause form, what ended.
func PausesPage(store PauseStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f := views.PauseForm{Kind: dlq.PauseTask, Durations: pauseDurations, For: defaultPauseFor, Now: now()}
		return renderPauses(c, store, version, f, http.StatusOK, doneFlashPause(c.QueryParam("done"), c.QueryParam("what")))
	}
}

func renderPauses(c echo.Context, store PauseStore, version string, f views.PauseForm, status int, flash *views.Flash) error {
	ctx := c.Request().Context()
	open, err := store.PausesWithBacklog(ctx)
	if err != nil {
		return err
	}
	recent, err := store.RecentPauses(ctx, 20)
	if err != nil {
		return err
	}
	throttles, err := store.ThrottlesWithWork(ctx)
	if err != nil {
		return err
	}
	recentThrottles, err := store.RecentThrottles(ctx, 20)
	if err != nil {
		return err
	}
	meta := Meta(c, "Pauses and throttles", "", version)
	meta.Flash = flash
	f.CSRFToken, f.Waiting = meta.CSRFToken, -1
	if f.Key == "" {
		f.Key = newFormKey()
	}
	tf := throttleForm(f.Now)
	tf.CSRFToken, tf.Key = meta.CSRFToken, newFormKey()
	page := views.PausesPage{Open: pauseRows(open), Form: f, ThrottleForm: tf, CanAct: meta.CanAct, CSRFToken: meta.CSRFToken}
	page.Throttles, page.RecentThrottles = throttleRows(throttles, recentThrottles)
	for _, p := range recent {
		if p.ResumedAt == nil {
			continue
		}
		row := views.PauseRow{PauseNotice: pauseNotice(p), EndedAt: p.ResumedAt, Ended: "expired"}
		if !p.Expired && p.ResumedBy != nil {
			row.Ended = "resumed by " + *p.ResumedBy
		}
		page.Recent = append(page.Recent, row)
	}
	return Render(c, status, views.Layout(meta, views.Pauses(page)))
}

// pauseRows maps the open pauses and their backlogs for the pages.
func pauseRows(open []dlq.ActivePause) []views.PauseRow {
	rows := make([]views.PauseRow, len(open))
	for i, p := range open {
		rows[i] = views.PauseRow{PauseNotice: pauseNotice(p.Pause), Waiting: p.Waiting, Scheduled: p.Scheduled}
	}
	return rows
}

func doneFlashPause(done, what string) *views.Flash {
	if len(what) > 300 {
		return nil
	}
	switch done {
	case "paused":
		return &views.Flash{Kind: "ok", Message: "Paused " + what + ". Workers claim none of its jobs until it is resumed."}
	case "resumed":
		return &views.Flash{Kind: "ok", Message: "Resumed " + what + ". Workers are claiming its jobs again."}
	case "throttled":
		return &views.Flash{Kind: "ok", Message: "Throttled " + what + ". Workers start its jobs within these limits, across all of them."}
	case "throttle-changed":
		return &views.Flash{Kind: "ok", Message: "Changed the throttle: " + what + "."}
	case "lifted":
		return &views.Flash{Kind: "ok", Message: "Lifted the throttle of " + what + ". Workers take its jobs as fast as they can again."}
	}
	return nil
}

// PauseCounter counts a queue's or task's waiting jobs for the form.
type PauseCounter interface {
	PauseStore
	WaitingJobs(ctx context.Context, kind, name string) (int64, error)
}

// NewPausePage renders /pauses/new?task=NAME (or ?queue=NAME): the form
// one click away from a group, a queue or a task.
func NewPausePage(store PauseCounter, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		kind, name := dlq.PauseTask, c.QueryParam("task")
		if q := c.QueryParam("queue"); q != "" {
			kind, name = dlq.PauseQueue, q
		}
		if problems := (dlq.PauseParams{Kind: kind, Name: name, Reason: "-"}).Valid(); len(problems) > 0 {
			return BadRequest("invalid_target", "Say what to pause: /pauses/new?task=payments.charge or /pauses/new?queue=payments (%s).", joinProblems(problems))
		}
		meta := Meta(c, "Pause "+kind+" "+name, "", version)
		f := views.PauseForm{Kind: kind, Name: name, Durations: pauseDurations, For: defaultPauseFor, Key: newFormKey(), Now: now(),
			CSRFToken: meta.CSRFToken, Waiting: -1, Open: openPauseOf(c, kind, name)}
		if n, err := store.WaitingJobs(c.Request().Context(), kind, name); err == nil {
			f.Waiting = n
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.PauseFormPage(f)))
	}
}

// PauseForm handles the pause form's POST: 303 to /pauses on success; the
// form again with the problems named (422), or the open pause (409).
func PauseForm(store PauseStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		t := now()
		f := views.PauseForm{Kind: formText(c, "kind"), Name: formText(c, "name"), Reason: formText(c, "reason"),
			For: formText(c, "for"), Until: formText(c, "until"), Durations: pauseDurations, Key: c.FormValue("key"), Now: t}
		until, problems := parseExpiry(t, f.For, f.Until)
		if len(problems) == 0 {
			res, err := store.PauseWork(c.Request().Context(), dlq.PauseParams{Kind: f.Kind, Name: f.Name, Reason: f.Reason,
				Until: until, UntilField: expiryField(f.For), Expiry: expiryAsSent(f.For, f.Until), Actor: ActorFrom(c).Actor, Now: t, Key: f.Key})
			var ve *dlq.ValidationError
			switch {
			case err == nil:
				return c.Redirect(http.StatusSeeOther, "/pauses?"+url.Values{"done": {"paused"}, "what": {res.Pause.Target()}}.Encode())
			case errors.As(err, &ve):
				problems = ve.Fields
			default:
				var pc *dlq.PauseConflictError
				if errors.As(err, &pc) {
					f.Key = "" // a new key: this one is spent on the refusal's request
					return renderPauses(c, store, version, f, http.StatusConflict, &views.Flash{Kind: "error", Message: "Not paused: " + pc.Error() + "."})
				}
				return err
			}
		}
		// The target's field problems land on "name" in the form.
		for _, k := range []string{dlq.PauseQueue, dlq.PauseTask} {
			if msg, ok := problems[k]; ok {
				problems["name"] = msg
			}
		}
		if msg, ok := problems["for"]; ok {
			problems["until"] = msg
		}
		f.Problems = problems
		if f.Name != "" && problems["name"] == "" && problems["kind"] == "" {
			meta := Meta(c, "Pause "+f.Kind+" "+f.Name, "", version)
			f.CSRFToken, f.Waiting = meta.CSRFToken, -1
			return Render(c, http.StatusUnprocessableEntity, views.Layout(meta, views.PauseFormPage(f)))
		}
		return renderPauses(c, store, version, f, http.StatusUnprocessableEntity,
			&views.Flash{Kind: "error", Message: "Not paused: " + joinProblems(problems)})
	}
}

// ResumeForm handles a resume button: 303 to /pauses, or the pause's end
// in words (409).
func ResumeForm(store PauseStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A pause", "/pauses/12/resume")
		if err != nil {
			return err
		}
		res, err := store.ResumeWork(c.Request().Context(), dlq.ResumeParams{ID: id, Reason: formText(c, "reason"),
			Actor: ActorFrom(c).Actor, Now: now(), Key: c.FormValue("key")})
		var pc *dlq.PauseConflictError
		if errors.As(err, &pc) {
			f := views.PauseForm{Kind: dlq.PauseTask, Durations: pauseDurations, For: defaultPauseFor}
			return renderPauses(c, store, version, f, http.StatusConflict, &views.Flash{Kind: "warn", Message: "Nothing to resume: " + pc.Error() + "."})
		}
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/pauses?"+url.Values{"done": {"resumed"}, "what": {res.Pause.Target()}}.Encode())
	}
}

// pauseBody is the JSON of POST /api/v1/pauses.
type pauseBody struct {
	Queue  string `json:"queue"`
	Task   string `json:"task"`
	Reason string `json:"reason"`
	// Until is an RFC 3339 timestamp or a time of day in UTC ("14:30");
	// For a duration ("30m"). Neither: until someone resumes it.
	Until string `json:"until"`
	For   string `json:"for"`
}

// PauseJSON answers a pause or a resume.
type PauseJSON struct {
	Pause        dlq.Pause `json:"pause"`
	AuditEventID int64     `json:"audit_event_id"`
	Repeated     bool      `json:"repeated"`
}

// APIPause answers POST /api/v1/pauses: 201 with the pause; 400 with the
// fields in words; 409 naming the open pause when already paused.
func APIPause(store PauseStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		var b pauseBody
		if err := decodeOptionalJSON(c, &b, "queue or task, reason, until or for"); err != nil {
			return err
		}
		kind, name := dlq.PauseTask, b.Task
		switch {
		case b.Queue != "" && b.Task != "":
			return &dlq.ValidationError{Fields: map[string]string{"queue": `give "queue" or "task", not both`}}
		case b.Queue != "":
			kind, name = dlq.PauseQueue, b.Queue
		case b.Task == "":
			return &dlq.ValidationError{Fields: map[string]string{"task": `say what to pause: {"task": "payments.charge"} or {"queue": "payments"}`}}
		}
		t := now()
		until, problems := parseExpiry(t, b.For, b.Until)
		if len(problems) > 0 {
			return &dlq.ValidationError{Fields: problems}
		}
		res, err := store.PauseWork(c.Request().Context(), dlq.PauseParams{Kind: kind, Name: name, Reason: b.Reason,
			Until: until, UntilField: expiryField(b.For), Expiry: expiryAsSent(b.For, b.Until), Actor: ActorFrom(c).Actor, Now: t, Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		status := http.StatusCreated
		if res.Repeated {
			status = http.StatusOK
		}
		return c.JSON(status, PauseJSON{Pause: res.Pause, AuditEventID: res.AuditID, Repeated: res.Repeated})
	}
}

// APIResume answers DELETE /api/v1/pauses/{id} and POST
// /api/v1/pauses/{id}/resume: 200 with the ended pause; 404; 409 saying
// how an already ended pause ended.
func APIResume(store PauseStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A pause", "/api/v1/pauses/12")
		if err != nil {
			return err
		}
		reason, err := optionalReason(c)
		if err != nil {
			return err
		}
		res, err := store.ResumeWork(c.Request().Context(), dlq.ResumeParams{ID: id, Reason: reason,
			Actor: ActorFrom(c).Actor, Now: now(), Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, PauseJSON{Pause: res.Pause, AuditEventID: res.AuditID, Repeated: res.Repeated})
	}
}

// APIPauses answers GET /api/v1/pauses: the open pauses with the jobs
// waiting behind each; ?recent=N adds the latest N pauses, ended or not.
func APIPauses(store PauseStore) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		open, err := store.PausesWithBacklog(ctx)
		if err != nil {
			return err
		}
		out := struct {
			Pauses []dlq.ActivePause `json:"pauses"`
			Recent []dlq.Pause       `json:"recent,omitempty"`
		}{Pauses: open}
		if out.Pauses == nil {
			out.Pauses = []dlq.ActivePause{}
		}
		n, err := recentParam(c, "pauses")
		if err != nil {
			return err
		}
		if n > 0 {
			if out.Recent, err = store.RecentPauses(ctx, n); err != nil {
				return err
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}
