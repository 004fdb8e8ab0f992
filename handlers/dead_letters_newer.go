package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// NewerCounter counts letters that arrived after a page was made.
type NewerCounter interface {
	CountNewer(ctx context.Context, f dlq.Filter, afterID int64) (int64, error)
}

// NewerURL is what an open list polls: how many letters its filter
// matches beyond the newest one it shows.
const NewerURL = "/dead-letters/newer"

// newerHref is the poll of a list under filter f whose newest letter is
// maxID.
func newerHref(f dlq.Filter, maxID int64) string {
	v := f.FirstPage().Values()
	v.Set("after", strconv.FormatInt(maxID, 10))
	return NewerURL + "?" + v.Encode()
}

// DeadLettersNewer answers the list's poll with "N new letters since you
// opened this page — show them", or nothing while there are none.
func DeadLettersNewer(store NewerCounter, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		q := c.QueryParams()
		after, err := strconv.ParseInt(q.Get("after"), 10, 64)
		if err != nil || after < 0 {
			return BadRequest("invalid_after", "after must be a letter id, a whole number; %q is not.", q.Get("after"))
		}
		rest := url.Values{}
		for k, v := range q {
			if k != "after" {
				rest[k] = v
			}
		}
		f, err := ParseFilter(rest, now())
		if err != nil {
			return err
		}
		n, err := store.CountNewer(ctx, f, after)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		text := ""
		if n > 0 {
			count := views.Number(n)
			if n >= dlq.NewerCap {
				count += "+"
			}
			text = fmt.Sprintf("%s new %s since you opened this page", count, plural(int(n), "letter", "letters"))
		}
		return Render(c, http.StatusOK, views.NewerLetters(text, "/dead-letters"+query(f.FirstPage())))
	}
}

// listNewer is the poll of a first page that shows letters ("" otherwise:
// a later page is history by choice).
func listNewer(f dlq.Filter, page dlq.DeadLetterPage) string {
	if f.After != nil || len(page.Letters) == 0 {
		return ""
	}
	var maxID int64
	for _, d := range page.Letters {
		maxID = max(maxID, d.ID)
	}
	return newerHref(f, maxID)
}
