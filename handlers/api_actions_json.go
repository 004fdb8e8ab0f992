package handlers

import (
	"bytes"
	"errors"
	"io"

	"github.com/labstack/echo/v4"
)

// decodeOptionalJSON is decodeJSON (strict: unknown fields, malformed JSON
// and trailing data are 400s that say where) for bodies that may be left
// out entirely: an action whose every field is optional — a replay without
// edits — may be sent with no body at all, and dst keeps its zero value.
func decodeOptionalJSON(c echo.Context, dst any, known string) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return he // 413 from the body limit
		}
		return BadRequest("unreadable_body", "could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	return decodeJSON(c, dst, known)
}
