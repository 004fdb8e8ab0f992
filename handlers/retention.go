package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// Retention of settled letters, seen coming: the overview and the letter
// list say how many letters the next scheduled purge removes and when,
// and name the purges held because their group is still growing, with a
// button (operators) that confirms one.

// RetentionStore forecasts the next purge and confirms a held one
// (store/operations).
type RetentionStore interface {
	PurgeForecast(ctx context.Context, at time.Time, olderThan time.Duration, now time.Time) (dlq.PurgeForecast, error)
	ConfirmPurgeHold(ctx context.Context, group string, actor dlq.Actor, now time.Time) (int64, error)
}

const retentionKey = "redrive.retention"

// retentionTimeout bounds the forecast's read: a page is worth more than
// its forecast when the database is slow.
const retentionTimeout = 2 * time.Second

// RetentionNotice loads the forecast for the overview and the letter list
// (GETs of those pages only, not their fragments), kept for a moment by
// banners. A failed read leaves the notice out rather than failing the
// page.
func RetentionNotice(store RetentionStore, retain time.Duration, now func() time.Time, banners *Banners) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method != http.MethodGet || IsHTMX(c) || (r.URL.Path != "/" && r.URL.Path != "/dead-letters") {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(r.Context(), retentionTimeout)
			defer cancel()
			at := now()
			f, err := banners.purgeForecast(ctx, store, dlq.NextPurge(at), retain, at)
			if err == nil {
				v := retentionView(f, retain, at)
				if n := c.QueryParam("purged"); n != "" && r.URL.Path == "/" {
					v.Done = fmt.Sprintf("Purged %s settled letters of group %s, as you confirmed.", n, c.QueryParam("group"))
				}
				if v.Scheduled || len(v.Holds) > 0 || v.Done != "" {
					c.Set(retentionKey, v)
				}
			}
			return next(c)
		}
	}
}

// retentionView writes a forecast for people.
func retentionView(f dlq.PurgeForecast, retain time.Duration, now time.Time) *views.Retention {
	v := &views.Retention{Scheduled: retain > 0, Retain: spanText(retain), At: f.At, In: spanText(f.At.Sub(now)),
		SettledBefore: f.SettledBefore, Removes: views.Number(f.Removes)}
	if f.Capped {
		v.Removes = "over " + views.Number(f.Removes)
	}
	v.NoneToRemove = f.Removes == 0 && !f.Capped
	for _, h := range f.Holds {
		v.Holds = append(v.Holds, views.RetentionHold{Group: h.Fingerprint, Task: h.Task, Letters: h.Letters,
			GroupHref: "/groups/" + url.PathEscape(h.Fingerprint), HeldAt: h.HeldAt, SettledBefore: h.SettledBefore,
			ConfirmURL: "/retention/holds/" + url.PathEscape(h.Fingerprint) + "/confirm"})
	}
	return v
}

// mayPurge refuses viewers: confirming a purge deletes letters.
func mayPurge(c echo.Context) error {
	if ActorFrom(c).Role.CanAct() {
		return nil
	}
	return dlq.Errorf(dlq.EForbidden, "You may not do this: confirming a purge needs the operator or admin role")
}

// ConfirmPurgeForm answers the overview's Confirm button: it deletes the
// held group's settled letters (audited) and goes back to the overview
// saying how many.
func ConfirmPurgeForm(store RetentionStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPurge(c); err != nil {
			return err
		}
		group, err := url.PathUnescape(c.Param("group"))
		if err != nil || group == "" {
			return BadRequest("invalid_id", "%q is not an error group's id", c.Param("group"))
		}
		n, err := store.ConfirmPurgeHold(c.Request().Context(), group, ActorFrom(c).Actor, now())
		if err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/?"+url.Values{"purged": {fmt.Sprint(n)}, "group": {group}}.Encode())
	}
}

// apiRetention is GET /api/v1/retention's answer.
type apiRetention struct {
	// RetainLetters is the console's retention ("720h0m0s"), empty when
	// it purges nothing by itself.
	RetainLetters string          `json:"retain_letters"`
	NextPurge     *apiNextPurge   `json:"next_purge"`
	Holds         []dlq.PurgeHold `json:"holds"`
}

// apiNextPurge is what the next scheduled purge removes.
type apiNextPurge struct {
	At            time.Time `json:"at"`
	SettledBefore time.Time `json:"settled_before"`
	Removes       int64     `json:"removes"`
	// Capped: there are more than Removes (counted up to 100,000).
	Capped bool `json:"capped"`
}

// APIRetention answers GET /api/v1/retention: the next scheduled purge
// (null when the console schedules none) and the held purges.
func APIRetention(store RetentionStore, retain time.Duration, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		at := now()
		f, err := store.PurgeForecast(c.Request().Context(), dlq.NextPurge(at), retain, at)
		if err != nil {
			return err
		}
		out := apiRetention{Holds: f.Holds}
		if out.Holds == nil {
			out.Holds = []dlq.PurgeHold{}
		}
		if retain > 0 {
			out.RetainLetters = retain.String()
			out.NextPurge = &apiNextPurge{At: f.At, SettledBefore: f.SettledBefore, Removes: f.Removes, Capped: f.Capped}
		}
		return c.JSON(http.StatusOK, out)
	}
}

// APIConfirmPurge answers POST /api/v1/retention/holds/{group}/confirm:
// 200 with how many letters it deleted; 404 when no purge is held for the
// group (someone confirmed it, or the next purge found it quiet).
func APIConfirmPurge(store RetentionStore, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := mayPurge(c); err != nil {
			return err
		}
		group, err := url.PathUnescape(c.Param("group"))
		if err != nil || group == "" {
			return BadRequest("invalid_id", "%q is not an error group's id", c.Param("group"))
		}
		n, err := store.ConfirmPurgeHold(c.Request().Context(), group, ActorFrom(c).Actor, now())
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"fingerprint": group, "purged": n})
	}
}
