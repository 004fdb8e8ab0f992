package handlers

import (
	"bytes"
	"strconv"

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

// optionalReason reads an action's optional JSON body, {"reason": "..."}:
// no body is no reason.
func optionalReason(c echo.Context) (string, error) {
	var b reasonBody
	if err := decodeOptionalJSON(c, &b, "reason"); err != nil {
		return "", err
	}
	return b.Reason, nil
}

// recentParam reads ?recent=N, how many of the latest pauses or
// throttles (what) a list adds: 0 when absent, 1 to 500 when given.
func recentParam(c echo.Context, what string) (int, error) {
	r := c.QueryParam("recent")
	if r == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1 || n > 500 {
		return 0, BadRequest("invalid_recent", "recent is how many of the latest %s to list, 1 to 500; %q is not one.", what, r)
	}
	return n, nil
}
