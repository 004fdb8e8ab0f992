package handlers

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"
)

// Render renders component into a buffer first, so a failed render never
// sends half a page, then writes it with status.
func Render(c echo.Context, status int, component templ.Component) error {
	var buf bytes.Buffer
	if err := component.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// IsHTMX reports whether the request came from htmx, which wants a fragment
// rather than a whole page.
func IsHTMX(c echo.Context) bool {
	return c.Request().Header.Get("HX-Request") == "true"
}

// RequestError is a problem with the request itself, shown to the user as
// it is: a bad filter, an unknown id, a malformed body.
type RequestError struct {
	Status  int    // HTTP status: 400, 404, 409, 413, 422 ...
	Code    string // machine-readable, for the JSON API: "invalid_filter"
	Message string // human-readable, safe to show
}

func (e *RequestError) Error() string { return e.Message }

// BadRequest returns a 400 RequestError.
func BadRequest(code, format string, args ...any) error {
	return &RequestError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a 404 RequestError.
func NotFound(format string, args ...any) error {
	return &RequestError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}
