package handlers

import (
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// The letter page's breadcrumb leads back to the list as it was filtered:
// the list's links carry its filter in ?list=, and the letter page reads it
// back (one that does not parse is dropped, never an error).

// crumbParam is the ?list= a list row's link carries ("" when unfiltered).
func crumbParam(f dlq.Filter) string {
	q := strings.TrimPrefix(query(f.FirstPage()), "?")
	if q == "" {
		return ""
	}
	return "?" + url.Values{"list": {q}}.Encode()
}

// crumbHref is the list a letter page's breadcrumb leads back to.
func crumbHref(c echo.Context) string {
	raw := c.QueryParam("list")
	if raw == "" {
		return "/dead-letters"
	}
	// Re-encoded, the filter stays a query string of the list: it cannot
	// lead anywhere else. The list itself judges the values.
	v, err := url.ParseQuery(raw)
	if err != nil || len(v) == 0 {
		return "/dead-letters"
	}
	return "/dead-letters?" + v.Encode()
}
