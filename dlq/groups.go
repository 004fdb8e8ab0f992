package dlq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrorGroup is one fingerprint: one bug, however many letters it made.
type ErrorGroup struct {
	Fingerprint   string    `db:"fingerprint" json:"fingerprint"`
	Task          string    `db:"task" json:"task"`
	ErrorClass    string    `db:"error_class" json:"error_class"`
	SampleMessage string    `db:"sample_message" json:"sample_message"`
	Total         int64     `db:"total" json:"total"`
	Pending       int64     `db:"pending" json:"pending"`
	FirstSeen     time.Time `db:"first_seen" json:"first_seen"`
	LastSeen      time.Time `db:"last_seen" json:"last_seen"`
	// LastHour counts the letters that failed in the 60 minutes before the
	// read (the database clock): what "is it still breaking" needs.
	LastHour int64 `db:"last_hour" json:"last_hour"`
	// SampleArgs and SampleKwargs are the arguments of the letter the
	// sample message comes from, so that the message can be masked as
	// that letter's is (mask.Policy.MaskText); never shown themselves.
	SampleArgs   json.RawMessage `db:"sample_args" json:"-"`
	SampleKwargs json.RawMessage `db:"sample_kwargs" json:"-"`
}

// The orders the groups page offers. Each maps to a fixed ORDER BY: sort
// keys never reach SQL as text from the request.
const (
	GroupSortPending  = "pending"
	GroupSortTotal    = "total"
	GroupSortLastSeen = "last_seen"
	// GroupSortNewest puts the groups first seen most recently first: a
	// bug that started 13 minutes ago with 34 letters is news, however
	// long the old backlogs are.
	GroupSortNewest = "newest"
	// GroupSortLastHour puts the groups with the most letters in the last
	// hour first: what is breaking right now.
	GroupSortLastHour = "last_hour"
)

// GroupSorts lists the orders in display order.
var GroupSorts = []string{GroupSortPending, GroupSortNewest, GroupSortLastHour, GroupSortTotal, GroupSortLastSeen}

// Group list sizes. Pages of groups go by number (OFFSET): error_groups
// holds one row per bug, hundreds or a few thousand, not one per letter,
// so skipping rows is cheap and a page number is what people share.
const (
	DefaultGroupLimit = 200
	MaxGroupLimit     = 500
	MaxGroupPage      = 1000
)

// GroupFilter selects and orders error groups.
type GroupFilter struct {
	Task  string
	Sort  string
	Limit int
	// Page is the 1-based page of Limit groups (0 means 1).
	Page int
	// PendingOnly leaves out groups with nothing pending (the overview).
	PendingOnly bool
	// Peek returns one group beyond the page, if there is one, so that a
	// pager knows whether a next page exists.
	Peek bool
}

// Validate reports every field of f that is out of bounds, as a
// *ValidationError keyed by the query-string name of the field.
func (f GroupFilter) Validate() error {
	problems := map[string]string{}
	if msg := TaskNameProblem(f.Task); f.Task != "" && msg != "" {
		problems["task"] = msg
	}
	if f.Sort != "" && !slices.Contains(GroupSorts, f.Sort) {
		problems["sort"] = "must be one of " + strings.Join(GroupSorts, ", ")
	}
	if f.Page < 0 || f.Page > MaxGroupPage {
		problems["page"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxGroupPage)
	}
	if f.Limit < 0 || f.Limit > MaxGroupLimit {
		problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxGroupLimit)
	}
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// SparkDays is how many days a group's sparkline covers.
const SparkDays = 14

// GroupHours is how many hourly buckets a group's page charts.
const GroupHours = 24
