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
	"github.com/redrive/redrive/views"
)

// GroupLister is what the error-groups page needs from the store.
type GroupLister interface {
	ListGroups(ctx context.Context, f dlq.GroupFilter) ([]dlq.ErrorGroup, error)
	GroupInflow(ctx context.Context, fingerprints []string, now time.Time) (map[string][]int64, error)
}

// Groups renders the error groups: the top groups in the chosen order, with
// their 14-day inflow read for the whole page in one query.
func Groups(store GroupLister, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		meta := Meta(c, "Error groups", "groups", version)
		q := c.QueryParams()
		v := views.GroupsView{Task: q.Get("task"), Sort: q.Get("sort"), Sorts: sortOptions()}
		f, err := ParseGroupFilter(q)
		if q.Get("limit") == "" {
			f.Limit = groupsPerPage
		}
		var verr *dlq.ValidationError
		if errors.As(err, &verr) {
			v.Problems = verr.Fields
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.Groups(v)))
		}
		if err != nil {
			return err
		}
		page := f
		page.Peek = true
		t := now()
		groups, spark, err := loadGroups(ctx, store, page, t)
		if err != nil {
			return err
		}
		v.Sort, v.Limit = f.Sort, f.Limit
		v.Pause = pauseLinks(meta)
		v.Page = max(1, f.Page)
		if len(groups) > f.Limit {
			groups = groups[:f.Limit]
			v.NextHref = groupsPageHref(f, v.Page+1)
		}
		if v.Page > 1 {
			v.PrevHref = groupsPageHref(f, v.Page-1)
		}
		for _, g := range groups {
			v.Rows = append(v.Rows, groupRow(g, spark[g.Fingerprint], t))
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.Groups(v)))
	}
}

func loadGroups(ctx context.Context, store GroupLister, f dlq.GroupFilter, now time.Time) ([]dlq.ErrorGroup, map[string][]int64, error) {
	groups, err := store.ListGroups(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	fps := make([]string, len(groups))
	for i, g := range groups {
		fps[i] = g.Fingerprint
	}
	spark, err := store.GroupInflow(ctx, fps, now)
	if err != nil {
		return nil, nil, err
	}
	return groups, spark, nil
}

// groupsPerPage is how many groups a page of /groups shows.
const groupsPerPage = 50

// groupsPageHref links to page n of the groups in f's order.
func groupsPageHref(f dlq.GroupFilter, n int) string {
	v := url.Values{"page": {fmt.Sprint(n)}}
	if f.Task != "" {
		v.Set("task", f.Task)
	}
	if f.Sort != dlq.GroupSortPending {
		v.Set("sort", f.Sort)
	}
	if f.Limit != groupsPerPage {
		v.Set("limit", fmt.Sprint(f.Limit))
	}
	return "/groups?" + v.Encode()
}

func sortOptions() []views.Option {
	labels := map[string]string{dlq.GroupSortPending: "most pending", dlq.GroupSortTotal: "most letters",
		dlq.GroupSortLastSeen: "last seen", dlq.GroupSortNewest: "newest (first seen)", dlq.GroupSortLastHour: "most in the last hour"}
	var opts []views.Option
	for _, s := range dlq.GroupSorts {
		opts = append(opts, views.Option{Value: s, Label: labels[s]})
	}
	return opts
}

func groupRow(g dlq.ErrorGroup, inflow []int64, now time.Time) views.GroupRow {
	var sum int64
	parts := make([]string, len(inflow))
	for i, n := range inflow {
		sum += n
		parts[i] = fmt.Sprint(n)
	}
	label := fmt.Sprintf("%s letters in the last %d days, per day oldest first: %s", views.Number(sum), dlq.SparkDays, strings.Join(parts, ", "))
	all := "/dead-letters?" + url.Values{"fingerprint": {g.Fingerprint}, "status": {dlq.StatusAll}}.Encode()
	list := all // a group with nothing pending links to its history
	if g.Pending > 0 {
		list = "/dead-letters?" + url.Values{"fingerprint": {g.Fingerprint}}.Encode()
	}
	return views.GroupRow{
		Fingerprint:   g.Fingerprint,
		Task:          g.Task,
		ErrorClass:    g.ErrorClass,
		SampleMessage: firstLine(g.SampleMessage, 140),
		SampleFull:    clip(g.SampleMessage, 2000),
		Total:         views.Number(g.Total),
		Pending:       views.Number(g.Pending),
		HasPending:    g.Pending > 0,
		FirstSeen:     g.FirstSeen,
		LastSeen:      g.LastSeen,
		ListHref:      list,
		Href:          GroupHref(g.Fingerprint),
		LastHour:      views.Number(g.LastHour),
		New:           isNewGroup(g.FirstSeen, now),
		Spiking:       !isNewGroup(g.FirstSeen, now) && isSpiking(g.LastHour, inflow),
		AllHref:       all,
		Spark:         views.NewSpark(inflow, label),
	}
}
