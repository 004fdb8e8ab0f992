package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/views"
)

// DeadLetterLister is what the dead-letter list needs from the store.
type DeadLetterLister interface {
	ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error)
	CountDeadLetters(ctx context.Context, f dlq.Filter) (dlq.Count, error)
	// Masker is the policy the letters are masked with: a search by a
	// key it hides is refused.
	Masker() mask.Policy
}

// readTimeout bounds each console read: a query that takes longer than
// this is a missing index, and the page should say so rather than hang.
const readTimeout = 10 * time.Second

// DeadLetters renders the dead-letter list. Every filter is in the query
// string; a refused filter re-renders the form with the problems named
// (400), and an htmx request gets only the results fragment.
func DeadLetters(store DeadLetterLister, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		q := c.QueryParams()
		v := views.DeadLettersView{
			Form:     filterForm(q),
			Reasons:  reasonOptions(),
			Statuses: statusOptions(),
			Limits:   limitOptions(q.Get("limit")),
		}
		meta := Meta(c, "Dead letters", "dead-letters", version)
		c.Response().Header().Add("Vary", "HX-Request")

		f, err := ParseFilter(q, now())
		if err == nil {
			err = maskedSearch(f, store.Masker(), "q")
		}
		var verr *dlq.ValidationError
		if errors.As(err, &verr) {
			v.Invalid = true
			v.Form.Problems = verr.Fields
			if wantsFragment(c) {
				// htmx 2 does not swap 4xx answers, and the person must
				// see why nothing changed: the fragment goes out as 200.
				return Render(c, http.StatusOK, views.DeadLetterFilterError(verr.Fields))
			}
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.DeadLetters(v)))
		}
		if err != nil {
			return err
		}
		// The page and the count are independent reads, and either may
		// take tens of milliseconds on a million letters (a common search
		// term): run them side by side, so the page waits for the slower
		// one only.
		var page dlq.DeadLetterPage
		var count dlq.Count
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() (err error) { page, err = store.ListDeadLetters(gctx, f); return err })
		g.Go(func() (err error) { count, err = store.CountDeadLetters(gctx, f); return err })
		if err := g.Wait(); err != nil {
			return err
		}
		if f.After == nil && page.Next == nil {
			// The first page is the whole list: its length is the count.
			count = dlq.Count{N: int64(len(page.Letters)), Exact: true}
		}
		v.Results = letterResults(f, page, count)
		v.Results.CanAct, v.Results.CSRFToken = meta.CanAct, meta.CSRFToken
		v.Results.FilterQuery = selectionQuery(f)
		v.Results.ArgKeys = argSuggestions(f, page.Letters, store.Masker())
		v.PauseTask, v.Pause = f.Task, pauseLinks(meta)
		if f.Fingerprint != "" && len(page.Letters) > 0 {
			v.PauseTask = page.Letters[0].Task // a group is one task's
		}
		v.Results.NewerURL = listNewer(f, page)
		if wantsFragment(c) {
			// The form sends every field, empty ones too; the address bar
			// gets the short canonical form of the same filter.
			c.Response().Header().Set("HX-Push-Url", "/dead-letters"+query(f))
			return Render(c, http.StatusOK, views.DeadLetterResultsFragment(v.Results))
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.DeadLetters(v)))
	}
}

// wantsFragment: htmx asks for the results alone, except when it restores
// history after a cache miss, when it needs the whole page.
func wantsFragment(c echo.Context) bool {
	return IsHTMX(c) && c.Request().Header.Get("HX-History-Restore-Request") != "true"
}

// filterForm echoes the raw query back into the form, defaults made visible.
func filterForm(q map[string][]string) views.DeadLetterFilterForm {
	get := func(k string) string {
		if vs := q[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	status := get("status")
	if status == "" {
		status = string(dlq.StatusPending)
	}
	limit := get("limit")
	if limit == "" {
		limit = strconv.Itoa(dlq.DefaultLimit)
	}
	return views.DeadLetterFilterForm{
		Task: get("task"), Queue: get("queue"), Reason: get("reason"), Status: status,
		ErrorClass: get("error_class"), Fingerprint: get("fingerprint"), Q: get("q"), Source: get("source"),
		Since: get("since"), Until: get("until"), Limit: limit,
	}
}

func reasonOptions() []views.Option {
	opts := []views.Option{{Value: "", Label: "any reason"}}
	for _, r := range dlq.Reasons {
		opts = append(opts, views.Option{Value: string(r), Label: reasonLabel(r)})
	}
	return opts
}

func statusOptions() []views.Option {
	opts := []views.Option{}
	for _, s := range dlq.Statuses {
		opts = append(opts, views.Option{Value: string(s), Label: string(s)})
	}
	return append(opts, views.Option{Value: dlq.StatusAll, Label: "all statuses"})
}

// limitOptions offers the usual page sizes, plus the current one if a
// pasted URL asked for another.
func limitOptions(current string) []views.Option {
	sizes := []string{"25", "50", "100", "200", "500"}
	opts := []views.Option{}
	found := current == ""
	for _, s := range sizes {
		opts = append(opts, views.Option{Value: s, Label: s})
		found = found || s == current
	}
	if !found {
		opts = append(opts, views.Option{Value: current, Label: current})
	}
	return opts
}

func reasonLabel(r dlq.Reason) string {
	switch r {
	case dlq.ReasonLeaseExpired:
		return "lease expired"
	default:
		return string(r)
	}
}

// letterResults maps a page of letters to the results view model.
func letterResults(f dlq.Filter, page dlq.DeadLetterPage, count dlq.Count) views.DeadLetterResults {
	r := views.DeadLetterResults{
		Count:      views.Number(count.N),
		CountExact: count.Exact && !count.TooSlow,
		StatusWord: string(f.Status),
		Narrowed:   f.Narrowed(),
		FirstPage:  f.After == nil,
		NewestURL:  "/dead-letters" + query(f.FirstPage()),
		ClearURL:   "/dead-letters",

		NotYetSearchable: page.NotYetSearchable,
	}
	switch {
	case count.TooSlow:
		r.Count = views.Number(int64(len(page.Letters))) + "+"
		r.CountNote = "(too many to count quickly)"
	case !count.Exact:
		r.Count += "+"
		r.CountNote = "(counting stops at " + views.Number(dlq.LetterCountCap) + ")"
	}
	all := f.FirstPage()
	all.Limit = dlq.DefaultLimit
	r.ExportCSV = "/dead-letters/export.csv" + query(all)
	r.ExportJSON = "/dead-letters/export.json" + query(all)
	if page.Next != nil {
		next := f
		next.After = page.Next
		r.NextURL = "/dead-letters" + query(next)
	}
	// Every row's link carries the same way back to this list.
	crumb := crumbParam(f)
	r.Rows = make([]views.DeadLetterRow, 0, len(page.Letters))
	for _, d := range page.Letters {
		r.Rows = append(r.Rows, views.DeadLetterRow{
			ID:          d.ID,
			Href:        "/dead-letters/" + strconv.FormatInt(d.ID, 10) + crumb,
			Task:        d.Task,
			Queue:       d.Queue,
			ErrorClass:  d.ErrorClass,
			Message:     firstLine(d.ErrorMessage, 160),
			MessageFull: clip(d.ErrorMessage, 2000),
			Attempts:    strconv.Itoa(d.Attempts) + "/" + strconv.Itoa(d.MaxAttempts),
			Reason:      reasonLabel(d.Reason),
			Status:      string(d.Status),
			FailedAt:    d.FailedAt,
			Source:      otherSource(d.Source),
		})
	}
	return r
}

// query encodes a filter as "?..." or "" when it has nothing to say.
func query(f dlq.Filter) string {
	if s := f.Values().Encode(); s != "" {
		return "?" + s
	}
	return ""
}

// otherSource is a letter's source when another system sent it, "" for
// Redrive's own: the lists name only the others.
func otherSource(source string) string {
	if source == dlq.RedriveSource {
		return ""
	}
	return source
}
