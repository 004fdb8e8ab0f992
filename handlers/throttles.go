package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// Throttles in the console and the API, beside pauses (pauses.go) and
// made the same way: setting, changing and lifting need the operator
// role; a queue or task already throttled is a 409 naming the open
// throttle (change that one instead); changing or lifting one that has
// ended is a 409 saying how it ended.

// ThrottleStore is what the throttle pages and endpoints need (store/queue).
type ThrottleStore interface {
	SetThrottle(ctx context.Context, p dlq.ThrottleParams) (dlq.ThrottleResult, error)
	LiftThrottle(ctx context.Context, p dlq.LiftParams) (dlq.ThrottleResult, error)
	OpenThrottles(ctx context.Context) ([]dlq.Throttle, bool, error)
	ExpireThrottles(ctx context.Context, now time.Time) ([]dlq.Throttle, error)
	ThrottlesWithWork(ctx context.Context) ([]dlq.ActiveThrottle, error)
	RecentThrottles(ctx context.Context, limit int) ([]dlq.Throttle, error)
	ThrottleByID(ctx context.Context, id int64) (dlq.Throttle, error)
	WaitingJobs(ctx context.Context, kind, name string) (int64, error)
}

const throttlesKey = "redrive.throttles"

// ThrottleBanner loads the open throttles for the banner of every page,
// on the same requests as PauseBanner and in the same way: one read of
// the small throttles table, kept for a moment by banners, an expiry
// recorded when nobody has yet, and no banner rather than a failed page
// when the read fails.
func ThrottleBanner(store ThrottleStore, now func() time.Time, banners *Banners) echo.MiddlewareFunc {
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
			open, lapsed, err := banners.openThrottles(ctx, store)
			if err == nil && lapsed {
				_, _ = store.ExpireThrottles(ctx, now()) // best effort: the claim ignores lapsed throttles anyway
				banners.changed()
			}
			if err == nil {
				notices := make([]views.ThrottleNotice, len(open))
				for i, t := range open {
					notices[i] = throttleNotice(t)
				}
				c.Set(throttlesKey, notices)
			}
			return next(c)
		}
	}
}

func throttleNotice(t dlq.Throttle) views.ThrottleNotice {
	return views.ThrottleNotice{ID: t.ID, Kind: t.Kind, Name: t.Name, Limits: t.Limits(), By: t.SetBy, Since: t.SetAt,
		Reason: t.Reason, Until: t.Until, JobsHref: "/jobs?" + url.Values{t.Kind: {t.Name}}.Encode()}
}

// throttleRows maps throttles for the pauses page.
func throttleRows(open []dlq.ActiveThrottle, recent []dlq.Throttle) (rows, ended []views.ThrottleRow) {
	for _, t := range open {
		rows = append(rows, throttleRow(t.Throttle, t.Running, t.Waiting))
	}
	for _, t := range recent {
		if t.LiftedAt == nil {
			continue
		}
		row := throttleRow(t, 0, 0)
		row.EndedAt, row.Ended = t.LiftedAt, "expired"
		if !t.Expired && t.LiftedBy != nil {
			row.Ended = "lifted by " + *t.LiftedBy
		}
		ended = append(ended, row)
	}
	return rows, ended
}

func throttleRow(t dlq.Throttle, running, waiting int64) views.ThrottleRow {
	row := views.ThrottleRow{ThrottleNotice: throttleNotice(t), Running: running, Waiting: waiting}
	if t.ChangedBy != nil {
		row.ChangedBy = *t.ChangedBy
	}
	return row
}

// throttleDurations are the form's choices of "lift by itself after":
// the pause's, but a throttle is lifted, not resumed.
var throttleDurations = append([]views.Option{{Value: "", Label: "no: until someone lifts it"}}, pauseDurations[1:]...)

// throttleForm is the throttle form with its defaults.
func throttleForm(now time.Time) views.ThrottleForm {
	return views.ThrottleForm{Kind: dlq.PauseTask, Durations: throttleDurations, For: defaultPauseFor, Now: now,
		Running: -1, Waiting: -1}
}

// parseLimits reads a throttle's limits as typed: empty is no limit. It
// returns the problems in words, keyed by field.
func parseLimits(maxRunning, maxPerSecond string) (*int, *float64, map[string]string) {
	problems := map[string]string{}
	var running *int
	var rate *float64
	if s := strings.TrimSpace(maxRunning); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			problems["max_running"] = fmt.Sprintf("%q is not a whole number: how many of its jobs may run at once, like 5", s)
		}
		running = &n
	}
	if s := strings.TrimSpace(maxPerSecond); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil {
			problems["max_per_second"] = fmt.Sprintf("%q is not a number: how many of its jobs may start a second, like 2 or 0.5", s)
		}
		rate = &r
	}
	return running, rate, problems
}

// limitText is a limit as the form shows it.
func limitText[T int | float64](v *T) string {
	switch x := any(v).(type) {
	case *int:
		if x != nil {
			return strconv.Itoa(*x)
		}
	case *float64:
		if x != nil {
			return strconv.FormatFloat(*x, 'f', -1, 64)
		}
	}
	return ""
}

// NewThrottlePage renders /throttles/new?task=NAME (or ?queue=NAME): the
// form one click away from a group, a queue or a task.
func NewThrottlePage(store ThrottleStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		kind, name := dlq.PauseTask, c.QueryParam("task")
		if q := c.QueryParam("queue"); q != "" {
			kind, name = dlq.PauseQueue, q
		}
		if problems := (dlq.PauseParams{Kind: kind, Name: name, Reason: "-"}).Valid(); len(problems) > 0 {
			return BadRequest("invalid_target", "Say what to throttle: /throttles/new?task=payments.charge or /throttles/new?queue=payments (%s).", joinProblems(problems))
		}
		meta := Meta(c, "Throttle "+kind+" "+name, "", version)
		f := throttleForm(now())
		f.Kind, f.Name, f.Key, f.CSRFToken = kind, name, newFormKey(), meta.CSRFToken
		for _, t := range meta.Throttles {
			if t.Kind == kind && t.Name == name {
				f.Open = &t
			}
		}
		countThrottled(c, store, &f)
		return Render(c, http.StatusOK, views.Layout(meta, views.ThrottleFormPage(f)))
	}
}

// countThrottled fills the form's counts of running and waiting jobs,
// leaving them unknown when the reads fail: the form matters more.
func countThrottled(c echo.Context, store ThrottleStore, f *views.ThrottleForm) {
	ctx := c.Request().Context()
	if n, err := store.WaitingJobs(ctx, f.Kind, f.Name); err == nil {
		f.Waiting = n
	}
	if open, err := store.ThrottlesWithWork(ctx); err == nil {
		for _, t := range open {
			if t.Kind == f.Kind && t.Name == f.Name {
				f.Running = t.Running
			}
		}
	}
}

// ChangeThrottlePage renders /throttles/{id}: the form to change an open
// throttle, filled with its limits, reason and expiry.
func ChangeThrottlePage(store ThrottleStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A throttle", "/throttles/12")
		if err != nil {
			return err
		}
		t, err := store.ThrottleByID(c.Request().Context(), id)
		if err != nil {
			return err
		}
		if t.LiftedAt != nil {
			return &dlq.ThrottleConflictError{Throttle: t, Ended: true}
		}
		meta := Meta(c, "Change the throttle of "+t.Target(), "", version)
		f := throttleForm(now())
		f.ID, f.Kind, f.Name, f.Reason, f.Key, f.CSRFToken = t.ID, t.Kind, t.Name, t.Reason, newFormKey(), meta.CSRFToken
		f.MaxRunning, f.MaxPerSecond, f.For = limitText(t.MaxRunning), limitText(t.MaxPerSecond), ""
		if t.Until != nil {
			f.Until = t.Until.UTC().Format(time.RFC3339)
		}
		countThrottled(c, store, &f)
		return Render(c, http.StatusOK, views.Layout(meta, views.ThrottleFormPage(f)))
	}
}

// ThrottleForm handles the throttle form's POST to /throttles (a new
// throttle) and /throttles/{id} (a change): 303 to the pauses page on
// success; the form again with the problems named (422); the open
// throttle, or how it ended (409).
func ThrottleForm(store ThrottleStore, pauses PauseStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		var id int64
		if c.Param("id") != "" {
			var err error
			if id, err = pathID(c, "A throttle", "/throttles/12"); err != nil {
				return err
			}
		}
		t := now()
		f := throttleForm(t)
		f.ID, f.Kind, f.Name, f.Reason = id, formText(c, "kind"), formText(c, "name"), formText(c, "reason")
		f.MaxRunning, f.MaxPerSecond = formText(c, "max_running"), formText(c, "max_per_second")
		f.For, f.Until, f.Key = formText(c, "for"), formText(c, "until"), c.FormValue("key")
		running, rate, problems := parseLimits(f.MaxRunning, f.MaxPerSecond)
		until, expiryProblems := parseExpiry(t, f.For, f.Until)
		for k, v := range expiryProblems {
			problems[k] = v
		}
		if len(problems) == 0 {
			res, err := store.SetThrottle(c.Request().Context(), dlq.ThrottleParams{ID: id, Kind: f.Kind, Name: f.Name,
				MaxRunning: running, MaxPerSecond: rate, Reason: f.Reason, Until: until, UntilField: expiryField(f.For),
				Expiry: expiryAsSent(f.For, f.Until), Actor: ActorFrom(c).Actor, Now: t, Key: f.Key})
			var ve *dlq.ValidationError
			var tc *dlq.ThrottleConflictError
			switch {
			case err == nil:
				done := "throttled"
				if id != 0 {
					done = "throttle-changed"
				}
				return c.Redirect(http.StatusSeeOther, "/pauses?"+url.Values{"done": {done}, "what": {res.Throttle.Target() + " to " + res.Throttle.Limits()}}.Encode()+"#throttles")
			case errors.As(err, &ve):
				problems = ve.Fields
			case errors.As(err, &tc):
				return renderPauses(c, pauses, version, views.PauseForm{Kind: dlq.PauseTask, Durations: pauseDurations, For: defaultPauseFor},
					http.StatusConflict, &views.Flash{Kind: "error", Message: "Not throttled: " + tc.Error() + "."})
			default:
				return err
			}
		}
		for _, k := range []string{dlq.PauseQueue, dlq.PauseTask} {
			if msg, ok := problems[k]; ok {
				problems["name"] = msg
			}
		}
		if msg, ok := problems["for"]; ok {
			problems["until"] = msg
		}
		f.Problems, f.Key = problems, newFormKey()
		title := "Throttle " + f.Kind + " " + f.Name
		if id != 0 {
			title = "Change the throttle of " + f.Kind + " " + f.Name
		}
		meta := Meta(c, title, "", version)
		f.CSRFToken = meta.CSRFToken
		return Render(c, http.StatusUnprocessableEntity, views.Layout(meta, views.ThrottleFormPage(f)))
	}
}

// LiftForm handles a lift button: 303 to the pauses page, or how the
// throttle ended (409).
func LiftForm(store ThrottleStore, pauses PauseStore, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A throttle", "/throttles/12/lift")
		if err != nil {
			return err
		}
		res, err := store.LiftThrottle(c.Request().Context(), dlq.LiftParams{ID: id, Reason: formText(c, "reason"),
			Actor: ActorFrom(c).Actor, Now: now(), Key: c.FormValue("key")})
		var tc *dlq.ThrottleConflictError
		if errors.As(err, &tc) {
			f := views.PauseForm{Kind: dlq.PauseTask, Durations: pauseDurations, For: defaultPauseFor}
			return renderPauses(c, pauses, version, f, http.StatusConflict, &views.Flash{Kind: "warn", Message: "Nothing to lift: " + tc.Error() + "."})
		}
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/pauses?"+url.Values{"done": {"lifted"}, "what": {res.Throttle.Target()}}.Encode()+"#throttles")
	}
}

// throttleBody is the JSON of POST /api/v1/throttles and PATCH
// /api/v1/throttles/{id}.
type throttleBody struct {
	Queue        string   `json:"queue"`
	Task         string   `json:"task"`
	MaxRunning   *int     `json:"max_running"`
	MaxPerSecond *float64 `json:"max_per_second"`
	Reason       string   `json:"reason"`
	// Until is an RFC 3339 timestamp or a time of day in UTC ("14:30");
	// For a duration ("30m"). Neither: until someone lifts it.
	Until string `json:"until"`
	For   string `json:"for"`
}

// ThrottleJSON answers a throttle, a change or a lift.
type ThrottleJSON struct {
	Throttle     dlq.Throttle `json:"throttle"`
	AuditEventID int64        `json:"audit_event_id"`
	Repeated     bool         `json:"repeated"`
}

const throttleFields = "queue or task, max_running, max_per_second, reason, until or for"

// APIThrottle answers POST /api/v1/throttles: 201 with the throttle; 400
// with the fields in words; 409 naming the open throttle.
func APIThrottle(store ThrottleStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		var b throttleBody
		if err := decodeOptionalJSON(c, &b, throttleFields); err != nil {
			return err
		}
		kind, name := dlq.PauseTask, b.Task
		switch {
		case b.Queue != "" && b.Task != "":
			return &dlq.ValidationError{Fields: map[string]string{"queue": `give "queue" or "task", not both`}}
		case b.Queue != "":
			kind, name = dlq.PauseQueue, b.Queue
		case b.Task == "":
			return &dlq.ValidationError{Fields: map[string]string{"task": `say what to throttle: {"task": "payments.charge"} or {"queue": "payments"}`}}
		}
		return setThrottleJSON(c, store, now(), 0, kind, name, b)
	}
}

// APIChangeThrottle answers PATCH /api/v1/throttles/{id}: the open
// throttle's limits, reason and expiry, all given again (as the form
// does), 200 with the throttle; 404; 409 when it has ended.
func APIChangeThrottle(store ThrottleStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A throttle", "/api/v1/throttles/12")
		if err != nil {
			return err
		}
		var b throttleBody
		if err := decodeOptionalJSON(c, &b, throttleFields); err != nil {
			return err
		}
		if b.Queue != "" || b.Task != "" {
			return &dlq.ValidationError{Fields: map[string]string{"task": "a throttle's queue or task cannot change: lift it and throttle the other"}}
		}
		return setThrottleJSON(c, store, now(), id, "", "", b)
	}
}

func setThrottleJSON(c echo.Context, store ThrottleStore, t time.Time, id int64, kind, name string, b throttleBody) error {
	until, problems := parseExpiry(t, b.For, b.Until)
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: problems}
	}
	res, err := store.SetThrottle(c.Request().Context(), dlq.ThrottleParams{ID: id, Kind: kind, Name: name,
		MaxRunning: b.MaxRunning, MaxPerSecond: b.MaxPerSecond, Reason: b.Reason, Until: until, UntilField: expiryField(b.For),
		Expiry: expiryAsSent(b.For, b.Until), Actor: ActorFrom(c).Actor, Now: t, Key: c.Request().Header.Get(idempotencyKey)})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if id == 0 && !res.Repeated {
		status = http.StatusCreated
	}
	return c.JSON(status, ThrottleJSON{Throttle: res.Throttle, AuditEventID: res.AuditID, Repeated: res.Repeated})
}

// APILift answers DELETE /api/v1/throttles/{id} and POST
// /api/v1/throttles/{id}/lift: 200 with the ended throttle; 404; 409
// saying how an already ended throttle ended.
func APILift(store ThrottleStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPause(c); err != nil {
			return err
		}
		id, err := pathID(c, "A throttle", "/api/v1/throttles/12")
		if err != nil {
			return err
		}
		reason, err := optionalReason(c)
		if err != nil {
			return err
		}
		res, err := store.LiftThrottle(c.Request().Context(), dlq.LiftParams{ID: id, Reason: reason,
			Actor: ActorFrom(c).Actor, Now: now(), Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, ThrottleJSON{Throttle: res.Throttle, AuditEventID: res.AuditID, Repeated: res.Repeated})
	}
}

// APIThrottles answers GET /api/v1/throttles: the open throttles with
// their jobs running and waiting; ?recent=N adds the latest N throttles,
// ended or not.
func APIThrottles(store ThrottleStore) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		open, err := store.ThrottlesWithWork(ctx)
		if err != nil {
			return err
		}
		out := struct {
			Throttles []dlq.ActiveThrottle `json:"throttles"`
			Recent    []dlq.Throttle       `json:"recent,omitempty"`
		}{Throttles: open}
		if out.Throttles == nil {
			out.Throttles = []dlq.ActiveThrottle{}
		}
		n, err := recentParam(c, "throttles")
		if err != nil {
			return err
		}
		if n > 0 {
			if out.Recent, err = store.RecentThrottles(ctx, n); err != nil {
				return err
			}
		}
		return c.JSON(http.StatusOK, out)
	}
}
