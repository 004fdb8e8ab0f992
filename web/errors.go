package web

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/replay"
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
func errorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
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
		case status == http.StatusServiceUnavailable && body.Code == codeUnavailable:
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
		default:
			title := http.StatusText(status)
			werr = handlers.Render(c, status, views.Layout(views.PageMeta{Title: title}, views.ErrorPage(status, title, body.Message)))
		}
		if werr != nil {
			logger.Error("write error response", "err", werr, "request_id", reqID)
		}
	}
}

// A request that failed because the database could not be reached answers
// 503 with this code and a Retry-After, on pages and in the API alike.
const (
	codeUnavailable    = "database_unavailable"
	retryAfterSeconds  = "5"
	unavailableMessage = "The database is unreachable right now, so this request could not be completed. " +
		"Nothing is wrong with the request: try again in a few seconds."
)

// classify maps an error to a status and a body safe to show.
func classify(err error) (int, apiErrorBody) {
	var reqErr *handlers.RequestError
	var valErr *dlq.ValidationError
	var httpErr *echo.HTTPError
	var editErr *replay.EditError
	var confirmErr *replay.ConfirmError
	var stateErr *dlq.StateError
	var keyErr *dlq.KeyReuseError
	switch {
	case errors.As(err, &reqErr):
		return reqErr.Status, apiErrorBody{Code: reqErr.Code, Message: reqErr.Message}
	// Actions on dead letters (replay, discard, bulk): an edit that is not
	// valid JSON is well-formed but unprocessable (422); an unconfirmed bulk
	// action is a bad request; a letter in the wrong state is a conflict
	// whose message says what it is now ("already replayed as job N").
	case errors.As(err, &editErr):
		return http.StatusUnprocessableEntity, apiErrorBody{Code: "invalid_edit", Message: editErr.Error(),
			Fields: map[string]string{editErr.Field: editErr.Message}}
	case errors.As(err, &confirmErr):
		return http.StatusBadRequest, apiErrorBody{Code: "confirmation_required", Message: confirmErr.Error(),
			Fields: map[string]string{"typed": confirmErr.Error()}}
	case errors.Is(err, replay.ErrForbidden):
		return http.StatusForbidden, apiErrorBody{Code: "forbidden", Message: dlq.ErrorMessage(err)}
	case errors.As(err, &stateErr):
		return http.StatusConflict, apiErrorBody{Code: "conflict", Message: stateErr.Error()}
	// A one-time key sent again with another request (another letter,
	// action or body): well-formed but unprocessable, as Stripe answers it.
	case errors.As(err, &keyErr):
		return http.StatusUnprocessableEntity, apiErrorBody{Code: "idempotency_key_reused", Message: "Refused: " + keyErr.Error() + "."}
	case errors.As(err, &valErr):
		return http.StatusBadRequest, apiErrorBody{Code: "invalid", Message: valErr.Error(), Fields: valErr.Fields}
	case dlq.IsUnstorableText(err):
		// A NUL escaped in a JSON body (\u0000) that only the database
		// refused; its transaction rolled back.
		return http.StatusBadRequest, apiErrorBody{Code: "invalid_text",
			Message: "The request holds a NUL byte or text that is not valid UTF-8, which cannot be stored; nothing was changed."}
	case errors.Is(err, dlq.ErrNotFound):
		return http.StatusNotFound, apiErrorBody{Code: "not_found", Message: "Not found."}
	case errors.Is(err, dlq.ErrConflict):
		return http.StatusConflict, apiErrorBody{Code: "conflict", Message: handlers.ConflictMessage(err)}
	case errors.Is(err, dlq.ErrInvalid):
		return http.StatusBadRequest, apiErrorBody{Code: "invalid", Message: err.Error()}
	case dlq.IsUnavailable(err):
		return http.StatusServiceUnavailable, apiErrorBody{Code: codeUnavailable, Message: unavailableMessage}
	case errors.As(err, &httpErr):
		msg := http.StatusText(httpErr.Code)
		if m, ok := httpErr.Message.(string); ok && httpErr.Code < 500 {
			msg = m
		}
		return httpErr.Code, apiErrorBody{Code: strings.ToLower(strings.ReplaceAll(http.StatusText(httpErr.Code), " ", "_")), Message: msg}
	default:
		return http.StatusInternalServerError, apiErrorBody{Code: "internal"}
	}
}
