package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// The list of bulk operations (/operations) and the banner naming those in
// flight on every page. Both read only the operations table; states are
// shown as dlq gives them, so a state this code does not know yet still
// shows, by its name.

// Operations renders GET /operations: filters in the query string (the
// API's: state, kind, actor), keyset pages. A refused filter shows the
// form with the problems named (400).
func Operations(store OperationLister, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		q := c.QueryParams()
		v := views.OperationsListView{
			Form:   views.OperationsFilterForm{State: q.Get("state"), Kind: q.Get("kind"), Actor: q.Get("actor")},
			States: operationStateOptions(), Kinds: operationKindOptions,
		}
		meta := Meta(c, "Bulk operations", "operations", version)
		f, err := parseOperationListFilter(q)
		var verr *dlq.ValidationError
		if errors.As(err, &verr) {
			v.Invalid, v.Form.Problems = true, verr.Fields
			return Render(c, http.StatusBadRequest, views.Layout(meta, views.OperationsList(v)))
		}
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		page, err := store.ListOperations(ctx, f)
		if err != nil {
			return err
		}
		for _, op := range page.Operations {
			v.Rows = append(v.Rows, operationRow(op))
		}
		first := f
		first.Before = 0
		v.Narrowed, v.FirstPage = f.Narrowed(), f.Before == 0
		v.NewestURL = "/operations" + encodedQuery(operationListQuery(first))
		if page.Next != 0 {
			next := f
			next.Before = page.Next
			v.NextURL = "/operations" + encodedQuery(operationListQuery(next))
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.OperationsList(v)))
	}
}

func encodedQuery(v url.Values) string {
	if s := v.Encode(); s != "" {
		return "?" + s
	}
	return ""
}

// operationStateOptions are the state filter's choices: the two phases
// first (what an incident asks: "what is still going on?"), then each state.
func operationStateOptions() []views.Option {
	opts := []views.Option{{Value: "", Label: "any state"},
		{Value: string(dlq.PhaseOpen), Label: "in flight (not finished)"}, {Value: string(dlq.PhaseFinished), Label: "finished"}}
	for _, st := range operationStates {
		opts = append(opts, views.Option{Value: string(st), Label: string(st)})
	}
	return opts
}

var operationKindOptions = []views.Option{{Value: "", Label: "replay or discard"},
	{Value: string(dlq.OpReplay), Label: "replay"}, {Value: string(dlq.OpDiscard), Label: "discard"}}

// operationRow maps an operation to a line of the list.
func operationRow(op dlq.Operation) views.OperationRow {
	handled := op.Done + op.Skipped
	if op.State == dlq.OpDone {
		handled = op.Matched // as the operation's page counts it
	}
	r := views.OperationRow{
		ID: op.ID, Href: fmt.Sprintf("/operations/%d", op.ID), Kind: string(op.Kind), State: string(op.State),
		StateText: opStateText(op, nil), StateKind: opStateKind(op, nil), Live: !op.State.Finished(),
		Actor: op.Actor, CreatedAt: op.CreatedAt, Matched: views.Number(op.Matched), Handled: views.Number(handled),
		Percent: percent(handled, op.Matched),
	}
	r.Selection, r.SelectionHref = operationSelection(op)
	return r
}

// operationSelection says in a few words what an operation acts on: an
// error group by its fingerprint (linked to the group's page), a filter in
// words (several groups among them), or how many ids.
func operationSelection(op dlq.Operation) (words, href string) {
	if op.Filter == nil {
		n := len(op.IDs)
		return fmt.Sprintf("%s %s by id", views.Number(int64(n)), plural(n, "letter", "letters")), ""
	}
	if v, ok := storedFilterValues(*op.Filter); ok {
		if fp := v.Get("fingerprint"); fp != "" && !strings.Contains(fp, ",") && onlyKeys(v, "fingerprint", "status") {
			return "error group " + fp, "/groups/" + url.PathEscape(fp)
		}
	}
	return filterWords(*op.Filter)
}

// onlyKeys reports whether v sets no key but those named.
func onlyKeys(v url.Values, keys ...string) bool {
	for k := range v {
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			return false
		}
	}
	return true
}

// inFlightKey is where OperationsBanner leaves the banner for Meta.
const inFlightKey = "redrive.inflight"

// inFlightShown is how many open operations the banner names; it counts
// the rest and links to the list of them.
const inFlightShown = 3

// InFlightReader reads the operations in flight (store/operations).
type InFlightReader interface {
	OperationsInFlight(ctx context.Context, limit int) (dlq.InFlight, error)
}

// OperationsBanner loads the bulk operations in flight for the banner of
// every page, on the same requests as PauseBanner (pages by someone signed
// in; not the API, assets or htmx fragments). It is one query on the
// partial index of open operations, kept for a moment by banners. A failed
// read leaves the banner out rather than failing the page.
func OperationsBanner(store InFlightReader, banners *Banners) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !wantsBanner(c) {
				return next(c)
			}
			ctx, cancel := context.WithTimeout(c.Request().Context(), pauseBannerTimeout)
			defer cancel()
			if in, err := banners.operationsInFlight(ctx, store); err == nil && len(in.Operations) > 0 {
				c.Set(inFlightKey, inFlightBanner(in))
			}
			return next(c)
		}
	}
}

// wantsBanner reports whether a request is a page someone signed in reads.
func wantsBanner(c echo.Context) bool {
	r := c.Request()
	path := r.URL.Path
	if r.Method != http.MethodGet || IsHTMX(c) || strings.HasPrefix(path, "/api/") ||
		strings.HasPrefix(path, "/static/") || strings.HasSuffix(path, ".csv") || strings.HasSuffix(path, ".json") {
		return false
	}
	_, ok := principal.From(c)
	return ok
}

func inFlightBanner(in dlq.InFlight) *views.InFlightBanner {
	b := &views.InFlightBanner{More: max(0, in.Open-len(in.Operations))}
	for _, op := range in.Operations {
		n := views.InFlightNotice{ID: op.ID, Verb: verbOf(op.Kind), Actor: op.Actor, State: string(op.State),
			Handled: views.Number(op.Done + op.Skipped), Matched: views.Number(op.Matched), Href: fmt.Sprintf("/operations/%d", op.ID)}
		if op.State != dlq.OpRunning {
			n.Note = strings.ToLower(opStateText(op, nil))
		}
		b.Operations = append(b.Operations, n)
	}
	return b
}
