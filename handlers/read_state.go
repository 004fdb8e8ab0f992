package handlers

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

const readStateKey = "redrive.read_state"

// SetReadState records that the request's reads go through the read
// replica's store, and where that store reads as of now. Package web sets it
// on the routes it wires to the read store; Meta turns it into the
// layout's notice.
func SetReadState(c echo.Context, s dlq.ReadState) { c.Set(readStateKey, s) }

// readNoticeAfter is the lag a page admits to: below it, the numbers are as
// fresh as a page ever is.
const readNoticeAfter = time.Second

// readNotice tells how fresh a page read from the read store is: nothing
// while the replica keeps within a second, its lag beyond that, and a
// warning when reads fell back to the primary.
func readNotice(s dlq.ReadState) *views.Flash {
	switch {
	case !s.OnReplica:
		return &views.Flash{Kind: "warn",
			Message: "The read replica " + s.Problem + ": this page reads the primary database instead."}
	case s.Measured && s.Lag > readNoticeAfter:
		return &views.Flash{Kind: "info", Message: "Numbers as of " + dlq.FormatLag(s.Lag) + " ago (read replica)."}
	default:
		return nil
	}
}
