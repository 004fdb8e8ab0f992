package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// OperationLister lists bulk operations, newest first.
type OperationLister interface {
	ListOperations(ctx context.Context, f dlq.OperationListFilter) (dlq.OperationPage, error)
}

// APIOperations answers GET /api/v1/operations?state=&kind=&actor=&limit=
// &cursor= with a page of operations, newest first (50 by default, at most
// 200), each as GET /api/v1/operations/{id} shows it without the canary's
// jobs, and the cursor of the next page (null on the last). state is one
// state, or open (not finished, whatever the state) or finished.
func APIOperations(store OperationLister) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := parseOperationListFilter(c.QueryParams())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		page, err := store.ListOperations(ctx, f)
		if err != nil {
			return err
		}
		out := struct {
			Items      []OperationJSON `json:"items"`
			NextCursor *string         `json:"next_cursor"`
		}{Items: make([]OperationJSON, 0, len(page.Operations))}
		for _, op := range page.Operations {
			out.Items = append(out.Items, apiOperation(op, nil))
		}
		if page.Next != 0 {
			s := strconv.FormatInt(page.Next, 10)
			out.NextCursor = &s
		}
		return c.JSON(http.StatusOK, out)
	}
}

// operationStates are the states ?state= may name, besides the phases
// open and finished: every state an operation can be in. Which of them
// are open is dlq's to say (OperationState.Finished), never this list's.
var operationStates = dlq.OperationStates

// parseOperationListFilter reads the list's query string, the page's and
// the API's alike. Problems come back as a *dlq.ValidationError by field.
func parseOperationListFilter(v url.Values) (dlq.OperationListFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := dlq.OperationListFilter{Limit: dlq.DefaultOperationLimit, Actor: get("actor")}
	problems := map[string]string{}
	parseOperationState(get("state"), &f, problems)
	switch k := dlq.OperationKind(get("kind")); k {
	case "", dlq.OpReplay, dlq.OpDiscard:
		f.Kind = k
	default:
		problems["kind"] = "must be replay or discard"
	}
	if len(f.Actor) > 200 || strings.ContainsFunc(f.Actor, unicode.IsControl) {
		problems["actor"] = "must be at most 200 printable characters"
	}
	parseOperationPage(get("limit"), get("cursor"), &f, problems)
	if len(problems) > 0 {
		return f, &dlq.ValidationError{Fields: problems}
	}
	return f, nil
}

// parseOperationState reads ?state= into f: a phase (open, finished),
// which spans several states, or a single state, which must be one an
// operation can be in. A problem is added to problems under "state".
func parseOperationState(s string, f *dlq.OperationListFilter, problems map[string]string) {
	switch s {
	case "":
	case string(dlq.PhaseOpen), string(dlq.PhaseFinished):
		f.Phase = dlq.OperationPhase(s)
	default:
		f.State = dlq.OperationState(s)
		names := []string{string(dlq.PhaseOpen), string(dlq.PhaseFinished)}
		for _, st := range operationStates {
			names = append(names, string(st))
		}
		if !slices.Contains(operationStates, f.State) {
			problems["state"] = "must be one of " + strings.Join(names, ", ")
		}
	}
}

// parseOperationPage reads ?limit= and ?cursor= (the id the next page
// starts below) into f, adding a problem to problems for each out of
// range; both are kept in f as given, problem or not.
func parseOperationPage(limit, cursor string, f *dlq.OperationListFilter, problems map[string]string) {
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > dlq.MaxOperationLimit {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", dlq.MaxOperationLimit)
		}
		f.Limit = n
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 1 {
			problems["cursor"] = "invalid cursor: start again from the newest page"
		}
		f.Before = n
	}
}

// operationListQuery encodes f as the query string parseOperationListFilter
// reads back; the default limit is left out.
func operationListQuery(f dlq.OperationListFilter) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("state", string(f.State))
	set("state", string(f.Phase))
	set("kind", string(f.Kind))
	set("actor", f.Actor)
	if f.Limit != dlq.DefaultOperationLimit && f.Limit != 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before > 0 {
		v.Set("cursor", strconv.FormatInt(f.Before, 10))
	}
	return v
}
