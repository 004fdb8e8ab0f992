package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/views"
)

// apiError is the JSON error body of every /api/ endpoint.
type apiError struct {
	Error apiErrorBody `json:"error"`
	// ReplayJobID names the job a letter was already replayed as, on a 409,
	// where a successful replay's answer has it too.
	ReplayJobID *int64 `json:"replay_job_id,omitempty"`
}

type apiErrorBody struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

// errorHandler is the only place an error becomes a response. Known kinds
// map to their status and a message safe to show; anything else is logged
// with the request id and shown as "Internal error", never as a stack trace.
//
// A page keeps the layout's header (who is signed in, Admin, Sign out) as
// far as the request got to know it; htmx, asking for a fragment, gets the
// error alone (ErrorFragment), which app.js turns into the outage banner.
func errorHandler(logger *slog.Logger, version string, now func() time.Time) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		status, body := classify(err)
		var stateErr *dlq.StateError
		var replayJobID *int64
		if errors.As(err, &stateErr) {
			replayJobID = stateErr.Letter.ReplayJobID
		}
		reqID := c.Response().Header().Get(echo.HeaderXRequestID)
		switch {
		case body.Code == dlq.EUnavailable:
			// Not the server's fault nor the client's: say so, and when to
			// try again. Logged as a warning; /readyz tells the same story.
			logger.Warn("request failed: database unavailable", "err", err, "request_id", reqID,
				"method", c.Request().Method, "path", c.Request().URL.Path)
			c.Response().Header().Set("Retry-After", retryAfterSeconds)
		case status >= 500:
			logger.Error("request failed", "err", err, "request_id", reqID,
				"method", c.Request().Method, "path", c.Request().URL.Path)
			body.Message = "Internal error. The request id is " + reqID + "; the server log has the details."
		}
		var werr error
		switch {
		case c.Request().Method == http.MethodHead:
			werr = c.NoContent(status)
		case strings.HasPrefix(c.Request().URL.Path, "/api/"):
			werr = c.JSON(status, apiError{Error: body, ReplayJobID: replayJobID})
		case handlers.IsHTMX(c) && c.Request().Header.Get("HX-History-Restore-Request") != "true":
			werr = handlers.Render(c, status, views.ErrorFragment(body.Code, body.Message))
		default:
			title := http.StatusText(status)
			meta := handlers.Meta(c, title, "", version)
			if body.Code == dlq.EUnavailable {
				meta.Outage = &views.Outage{At: now()}
				if c.Request().Method == http.MethodGet {
					meta.Outage.RetrySeconds, _ = strconv.Atoi(retryAfterSeconds)
				}
			}
			werr = handlers.Render(c, status, views.Layout(meta, views.ErrorPage(status, title, body.Message)))
		}
		if werr != nil {
			logger.Error("write error response", "err", werr, "request_id", reqID)
		}
	}
}

// A request that failed because the database could not be reached answers
// 503 with a Retry-After, on pages and in the API alike.
const retryAfterSeconds = "5"

// statusOf is the one table from an error code to its HTTP status. A code
// missing here is a 500: a new code must be placed deliberately.
var statusOf = map[string]int{
	dlq.EInvalid:              http.StatusBadRequest,
	dlq.EInvalidText:          http.StatusBadRequest,
	dlq.EConfirmationRequired: http.StatusBadRequest,
	// An edit that is not valid JSON, or a one-time key sent again with
	// another request: well-formed but unprocessable, as Stripe answers it.
	dlq.EInvalidEdit: http.StatusUnprocessableEntity,
	dlq.EKeyReused:   http.StatusUnprocessableEntity,
	// What handlers.BadRequest is called with: the request itself is bad.
	"empty_body":      http.StatusBadRequest,
	"empty_selection": http.StatusBadRequest,
	"invalid_action":  http.StatusBadRequest,
	"invalid_bound":   http.StatusBadRequest,
	"invalid_filter":  http.StatusBadRequest,
	"invalid_form":    http.StatusBadRequest,
	"invalid_id":      http.StatusBadRequest,
	"invalid_query":   http.StatusBadRequest,
	"invalid_recent":  http.StatusBadRequest,
	"invalid_after":   http.StatusBadRequest,
	"invalid_target":  http.StatusBadRequest,
	"invalid_task":    http.StatusBadRequest,
	"invalid_time":    http.StatusBadRequest,
	"malformed_json":  http.StatusBadRequest,
	"unreadable_body": http.StatusBadRequest,

	dlq.EUnauthenticated: http.StatusUnauthorized,
	"invalid_token":      http.StatusUnauthorized,
	dlq.EForbidden:       http.StatusForbidden,
	"csrf":               http.StatusForbidden,
	"disabled":           http.StatusForbidden,
	dlq.ENotFound:        http.StatusNotFound,
	// A letter or job in the wrong state: the message says what it is now
	// ("already replayed as job N").
	dlq.EConflict:    http.StatusConflict,
	dlq.EUnavailable: http.StatusServiceUnavailable,
	dlq.EInternal:    http.StatusInternalServerError,
}

// classify maps an error to a status and a body safe to show: a coded
// error by its code, one of echo's own (no route, body too large) by its
// status, anything else as an internal error whose words stay in the log.
func classify(err error) (int, apiErrorBody) {
	if code := dlq.ErrorCode(err); code != dlq.EInternal {
		status, ok := statusOf[code]
		if !ok {
			return http.StatusInternalServerError, apiErrorBody{Code: dlq.EInternal}
		}
		return status, apiErrorBody{Code: code, Message: dlq.ErrorMessage(err), Fields: dlq.ErrorFields(err)}
	}
	var httpErr *echo.HTTPError
	if errors.As(err, &httpErr) {
		msg := http.StatusText(httpErr.Code)
		if m, ok := httpErr.Message.(string); ok && httpErr.Code < 500 {
			msg = m
		}
		return httpErr.Code, apiErrorBody{Code: strings.ToLower(strings.ReplaceAll(http.StatusText(httpErr.Code), " ", "_")), Message: msg}
	}
	return http.StatusInternalServerError, apiErrorBody{Code: dlq.EInternal}
}
