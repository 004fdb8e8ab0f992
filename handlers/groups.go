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
		f, err := dlq.ParseGroupFilter(q)
		var verr *dlq.ValidationError
		if errors.As(err, &verr) {
			v.Problems = verr.Fields
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.Groups(v)))
		}
		if err != nil {
			return err
		}
		groups, spark, err := loadGroups(ctx, store, f, now())
		if err != nil {
			return err
		}
		v.Sort, v.Limit, v.AtLimit = f.Sort, f.Limit, len(groups) == f.Limit
		v.Pause = pauseLinks(meta)
		for _, g := range groups {
			v.Rows = append(v.Rows, groupRow(g, spark[g.Fingerprint]))
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

func sortOptions() []views.Option {
	labels := map[string]string{dlq.GroupSortPending: "most pending", dlq.GroupSortTotal: "most letters", dlq.GroupSortLastSeen: "most recent"}
	var opts []views.Option
	for _, s := range dlq.GroupSorts {
		opts = append(opts, views.Option{Value: s, Label: labels[s]})
	}
	return opts
}

func groupRow(g dlq.ErrorGroup, inflow []int64) views.GroupRow {
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
		AllHref:       all,
		Spark:         views.NewSpark(inflow, label),
	}
}
