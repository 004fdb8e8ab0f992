package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// OperationLister lists bulk operations, newest first.
type OperationLister interface {
	ListOperations(ctx context.Context, f dlq.OperationListFilter) ([]dlq.Operation, error)
}

// APIOperations answers GET /api/v1/operations?state=&limit= with the
// newest operations first (50 by default, at most 200), each as
// GET /api/v1/operations/{id} shows it, without the canary's jobs.
func APIOperations(store OperationLister) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := parseOperationListFilter(c.QueryParams())
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		ops, err := store.ListOperations(ctx, f)
		if err != nil {
			return err
		}
		out := struct {
			Items []OperationJSON `json:"items"`
		}{Items: make([]OperationJSON, 0, len(ops))}
		for _, op := range ops {
			out.Items = append(out.Items, apiOperation(op, nil))
		}
		return c.JSON(http.StatusOK, out)
	}
}

// operationStates are the states ?state= may name.
var operationStates = dlq.OperationStates

func parseOperationListFilter(v url.Values) (dlq.OperationListFilter, error) {
	f := dlq.OperationListFilter{Limit: dlq.DefaultOperationLimit}
	problems := map[string]string{}
	if s := strings.TrimSpace(v.Get("state")); s != "" {
		f.State = dlq.OperationState(s)
		known := false
		names := make([]string, len(operationStates))
		for i, st := range operationStates {
			names[i] = string(st)
			known = known || st == f.State
		}
		if !known {
			problems["state"] = "must be one of " + strings.Join(names, ", ")
		}
	}
	if s := strings.TrimSpace(v.Get("limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > dlq.MaxOperationLimit {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", dlq.MaxOperationLimit)
		}
		f.Limit = n
	}
	if len(problems) > 0 {
		return f, &dlq.ValidationError{Fields: problems}
	}
	return f, nil
}
