package handlers

import (
	"bytes"
	"fmt"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
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

// BadRequest returns a problem with the request itself (a bad filter, a
// malformed body), shown to the user as it is; the code says which
// ("invalid_filter") and must be one web's status table knows (400).
func BadRequest(code, format string, args ...any) error {
	return &dlq.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a dlq.Error coded dlq.ENotFound with its own message.
func NotFound(format string, args ...any) error {
	return &dlq.Error{Code: dlq.ENotFound, Message: fmt.Sprintf(format, args...)}
}
