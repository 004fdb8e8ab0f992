package handlers

import (
	"bytes"

	"github.com/labstack/echo/v4"
)

// decodeOptionalJSON is decodeJSON for bodies that may be left out
// entirely: an action whose every field is optional — a replay without
// edits — may be sent with no body at all, and dst keeps its zero value.
func decodeOptionalJSON(c echo.Context, dst any, known string) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return decodeBody(body, dst, known)
}
