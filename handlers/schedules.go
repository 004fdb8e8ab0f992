package handlers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// Schedules in the console and the API: the periodic jobs workers
// register, their last and next runs, their recent outcomes and dead
// letters, and disabling and enabling them, which needs the operator role
// and a reason and is audited. Enabling an enabled schedule (or disabling
// a disabled one) is a 409 saying who made it so and why.

// ScheduleReader lists the schedules, arguments masked (reads.Masked).
type ScheduleReader interface {
	Schedules(ctx context.Context) ([]dlq.Schedule, error)
}

// ScheduleChanger disables and enables a schedule (store/queue).
type ScheduleChanger interface {
	SetScheduleEnabled(ctx context.Context, p dlq.ScheduleChangeParams) (dlq.ScheduleChangeResult, error)
}

// scheduleOverdue is how late a schedule's next run may be before the
// page says no worker is running it: an occurrence is enqueued within a
// second or so of its time while any worker registers the schedule.
const scheduleOverdue = time.Minute

// mayChangeSchedule refuses a requester who may not disable or enable.
func mayChangeSchedule(c echo.Context) error {
	if ActorFrom(c).Role.CanAct() {
		return nil
	}
	return dlq.Errorf(dlq.EForbidden, "You may not do this: disabling and enabling schedules need the operator or admin role")
}

// SchedulesPage renders /schedules.
func SchedulesPage(reader ScheduleReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		return renderSchedules(c, reader, now, version, http.StatusOK, scheduleFlash(c.QueryParam("done"), c.QueryParam("what")), "", nil)
	}
}

// renderSchedules renders the page; problem, when set, is shown under
// the form of the schedule named row, with the reason typed kept.
func renderSchedules(c echo.Context, reader ScheduleReader, now func() time.Time, version string, status int,
	flash *views.Flash, row string, form *views.ScheduleRowForm) error {
	list, err := reader.Schedules(c.Request().Context())
	if err != nil {
		return err
	}
	meta := Meta(c, "Schedules", "schedules", version)
	meta.Flash = flash
	page := views.SchedulesPage{CanAct: meta.CanAct, CSRFToken: meta.CSRFToken, Key: newFormKey()}
	t := now()
	for _, s := range list {
		r := scheduleRow(s, t)
		if s.Name == row && form != nil {
			r.Form = *form
		}
		page.Rows = append(page.Rows, r)
	}
	return Render(c, status, views.Layout(meta, views.Schedules(page)))
}

// scheduleRow maps a schedule for the page.
func scheduleRow(s dlq.Schedule, now time.Time) views.ScheduleRow {
	r := views.ScheduleRow{Name: s.Name, When: s.When(), Task: s.Task, Queue: s.Queue, Enabled: s.Enabled,
		NextRunAt: s.NextRunAt, Overdue: s.Enabled && now.Sub(s.NextRunAt) > scheduleOverdue, LastSeenAt: s.LastSeenAt,
		TaskHref: "/jobs?" + url.Values{"task": {s.Task}}.Encode()}
	if s.ChangedBy != nil && s.ChangedAt != nil {
		r.ChangedBy, r.ChangedAt = *s.ChangedBy, s.ChangedAt
		if s.ChangeReason != nil {
			r.ChangeReason = *s.ChangeReason
		}
	}
	for _, run := range s.Runs {
		v := views.ScheduleRunView{At: run.OccurrenceAt, Outcome: string(run.Outcome()), JobHref: "/jobs/" + strconv.FormatInt(run.JobID, 10)}
		if run.State == "" {
			v.JobHref = "" // cleaned away after it succeeded
		}
		if run.DeadLetterID != nil {
			v.LetterHref = "/dead-letters/" + strconv.FormatInt(*run.DeadLetterID, 10)
			v.LetterID = *run.DeadLetterID
			r.DeadLetters = append(r.DeadLetters, v)
		}
		r.Runs = append(r.Runs, v)
	}
	return r
}

func scheduleFlash(done, what string) *views.Flash {
	if len(what) > 300 {
		return nil
	}
	switch done {
	case "disabled":
		return &views.Flash{Kind: "ok", Message: "Disabled schedule " + what + ". Its occurrences enqueue nothing until it is enabled; a job already enqueued still runs."}
	case "enabled":
		return &views.Flash{Kind: "ok", Message: "Enabled schedule " + what + ". Its next occurrence is enqueued; the ones that passed while it was disabled are not made up."}
	}
	return nil
}

// ScheduleForm handles the disable and enable buttons: 303 to /schedules;
// the page again with the problem under the form (422), or the conflict
// in words (409).
func ScheduleForm(changer ScheduleChanger, reader ScheduleReader, now func() time.Time, version string, enable bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayChangeSchedule(c); err != nil {
			return err
		}
		name := c.Param("name")
		form := views.ScheduleRowForm{Reason: formText(c, "reason")}
		res, err := changer.SetScheduleEnabled(c.Request().Context(), dlq.ScheduleChangeParams{Name: name, Enabled: enable,
			Reason: form.Reason, Actor: ActorFrom(c).Actor, Now: now(), Key: c.FormValue("key")})
		var ve *dlq.ValidationError
		switch {
		case err == nil:
			done := "disabled"
			if enable {
				done = "enabled"
			}
			return c.Redirect(http.StatusSeeOther, "/schedules?"+url.Values{"done": {done}, "what": {res.Schedule.Name}}.Encode())
		case errors.As(err, &ve) && ve.Fields["name"] == "":
			form.Problem = joinProblems(ve.Fields)
			return renderSchedules(c, reader, now, version, http.StatusUnprocessableEntity,
				&views.Flash{Kind: "error", Message: "Schedule " + name + " unchanged: " + form.Problem}, name, &form)
		case dlq.ErrorCode(err) == dlq.EConflict:
			return renderSchedules(c, reader, now, version, http.StatusConflict,
				&views.Flash{Kind: "warn", Message: dlq.ErrorMessage(err) + "."}, "", nil)
		}
		return err
	}
}

// SchedulesJSON answers GET /api/v1/schedules.
type SchedulesJSON struct {
	Schedules []dlq.Schedule `json:"schedules"`
}

// APISchedules answers GET /api/v1/schedules: every schedule with its next
// run and its latest runs, newest first.
func APISchedules(reader ScheduleReader) echo.HandlerFunc {
	return func(c echo.Context) error {
		list, err := reader.Schedules(c.Request().Context())
		if err != nil {
			return err
		}
		if list == nil {
			list = []dlq.Schedule{}
		}
		return c.JSON(http.StatusOK, SchedulesJSON{Schedules: list})
	}
}

// APIChangeSchedule answers POST /api/v1/schedules/{name}/disable and
// /enable: 200 with the schedule as it is now; 400 without a reason; 404;
// 409 when it already is what was asked. The schedule is read back
// through reader, so its arguments are masked as everywhere else.
func APIChangeSchedule(changer ScheduleChanger, reader ScheduleReader, now func() time.Time, enable bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayChangeSchedule(c); err != nil {
			return err
		}
		reason, err := optionalReason(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		res, err := changer.SetScheduleEnabled(ctx, dlq.ScheduleChangeParams{Name: c.Param("name"), Enabled: enable, Reason: reason,
			Actor: ActorFrom(c).Actor, Now: now(), Key: c.Request().Header.Get(idempotencyKey)})
		if err != nil {
			return err
		}
		list, err := reader.Schedules(ctx)
		if err != nil {
			return err
		}
		for _, s := range list {
			if s.Name == res.Schedule.Name {
				res.Schedule = s
			}
		}
		return c.JSON(http.StatusOK, res)
	}
}
