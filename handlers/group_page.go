package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// GroupReader is what an error group's page needs from the store.
type GroupReader interface {
	Group(ctx context.Context, fingerprint string) (dlq.ErrorGroup, error)
	GroupHourly(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error)
	GroupInflow(ctx context.Context, fingerprints []string, now time.Time) (map[string][]int64, error)
	ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error)
	GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error)
	GroupSurvivor(ctx context.Context, id string) (string, bool, error)
}

// groupPageLetters is how many of the group's letters its page lists; the
// rest are one link away, in the list filtered to the group.
const groupPageLetters = 25

// GroupHref is the page of the error group with fingerprint.
func GroupHref(fingerprint string) string {
	return "/groups/" + url.PathEscape(fingerprint)
}

// GroupPage renders /groups/{fingerprint}: what broke and since when, how
// fast it is still breaking, a sample traceback, the newest letters, and
// the way to replay or discard the whole group.
func GroupPage(store GroupReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		fp := c.Param("fingerprint")
		g, err := store.Group(ctx, fp)
		if errors.Is(err, dlq.ErrNotFound) {
			// A group merged into another lives on as the survivor: old
			// links, notifications and audit entries lead there. Found,
			// not moved for good: an operator may split it again.
			if into, merged, serr := store.GroupSurvivor(ctx, fp); serr == nil && merged {
				return c.Redirect(http.StatusFound, GroupHref(into))
			}
		}
		if err != nil {
			return err
		}
		t := now()
		hourly, err := store.GroupHourly(ctx, fp, t)
		if err != nil {
			return err
		}
		daily, err := store.GroupInflow(ctx, []string{fp}, t)
		if err != nil {
			return err
		}
		status := url.Values{"fingerprint": {fp}}
		if g.Pending == 0 {
			status.Set("status", dlq.StatusAll) // a settled group shows its history
		}
		f, err := dlq.ParseFilter(status, t)
		if err != nil {
			return err
		}
		f.Limit = groupPageLetters
		page, err := store.ListDeadLetters(ctx, f)
		if err != nil {
			return err
		}
		meta := Meta(c, g.ErrorClass+" in "+g.Task, "groups", version)
		v := groupView(g, t)
		v.Hourly = hourlyChart(hourly, t, groupLettersBetween(fp))
		v.Hourly.ID, v.Hourly.Title = "group-hourly", "Letters of this group per hour over the last 24 hours"
		v.Daily = dailyChart(dailyBuckets(daily[fp], t), t, groupLettersBetween(fp))
		v.Daily.ID, v.Daily.Title = "group-daily", "Letters of this group per day over the last 14 days"
		if len(page.Letters) > 0 {
			// The newest letter's traceback stands for the group's; it is
			// read through the masking store like any letter.
			d, err := store.GetDeadLetter(ctx, page.Letters[0].ID)
			if err != nil {
				return err
			}
			v.SampleID, v.SampleHref, v.Traceback = d.ID, fmt.Sprintf("/dead-letters/%d", d.ID), d.Traceback
		}
		count := dlq.Count{N: g.Pending, Exact: true}
		if g.Pending == 0 {
			count.N = g.Total
		}
		v.Letters = letterResults(f, page, count)
		v.Letters.CanAct, v.Letters.CSRFToken = meta.CanAct, meta.CSRFToken
		v.Letters.FilterQuery = selectionQuery(f)
		v.CanAct = meta.CanAct
		v.Pause = pauseLinks(meta)
		return Render(c, http.StatusOK, views.Layout(meta, views.GroupPage(v)))
	}
}

// groupView maps a group to its page's header.
func groupView(g dlq.ErrorGroup, now time.Time) views.GroupPageView {
	pending := url.Values{"fingerprint": {g.Fingerprint}}
	all := url.Values{"fingerprint": {g.Fingerprint}, "status": {dlq.StatusAll}}
	bulk := func(action string) string {
		return "/dead-letters/bulk?" + url.Values{"action": {action}, "all_matching": {"1"}, "filter": {pending.Encode()}}.Encode()
	}
	return views.GroupPageView{
		Fingerprint: g.Fingerprint,
		Task:        g.Task,
		ErrorClass:  g.ErrorClass,
		Message:     g.SampleMessage,
		FirstSeen:   g.FirstSeen,
		LastSeen:    g.LastSeen,
		Pending:     views.Number(g.Pending),
		HasPending:  g.Pending > 0,
		Total:       views.Number(g.Total),
		LastHour:    views.Number(g.LastHour),
		New:         isNewGroup(g.FirstSeen, now),
		PendingHref: "/dead-letters?" + pending.Encode(),
		AllHref:     "/dead-letters?" + all.Encode(),
		TaskHref:    "/groups?" + url.Values{"task": {g.Task}}.Encode(),
		ReplayHref:  bulk(string(dlq.OpReplay)),
		DiscardHref: bulk(string(dlq.OpDiscard)),
	}
}

// groupLettersBetween links a chart bar to the group's letters (any
// status) that failed in [from, to).
func groupLettersBetween(fp string) func(from, to time.Time) string {
	return func(from, to time.Time) string {
		return "/dead-letters?" + url.Values{
			"fingerprint": {fp},
			"status":      {dlq.StatusAll},
			"since":       {from.UTC().Format(time.RFC3339)},
			"until":       {to.UTC().Format(time.RFC3339)},
		}.Encode()
	}
}

// dailyBuckets dates a group's daily inflow (oldest first, the last being
// now's UTC day) for the chart.
func dailyBuckets(days []int64, now time.Time) []dlq.InflowBucket {
	today := now.UTC().Truncate(24 * time.Hour)
	out := make([]dlq.InflowBucket, len(days))
	for i, n := range days {
		out[i] = dlq.InflowBucket{Start: today.AddDate(0, 0, i-len(days)+1), N: n}
	}
	return out
}

// newGroupWithin is how recently a group must have been first seen to be
// marked new.
const newGroupWithin = time.Hour

// isNewGroup reports whether a group first seen at first is news at now.
func isNewGroup(first, now time.Time) bool {
	return now.Sub(first) < newGroupWithin
}

// A group is spiking when its last hour holds at least spikeMin letters
// and spikeFactor times its average hour of the last 14 days: small
// numbers are noise, and a group that always runs hot is not news.
const (
	spikeMin    = 10
	spikeFactor = 3
)

// isSpiking reports whether a group's last hour stands out against its
// 14-day daily inflow (which includes that hour).
func isSpiking(lastHour int64, inflow []int64) bool {
	if lastHour < spikeMin {
		return false
	}
	var sum int64
	for _, n := range inflow {
		sum += n
	}
	hours := int64(max(1, len(inflow)*24))
	return lastHour*hours >= spikeFactor*max(0, sum-lastHour)
}
