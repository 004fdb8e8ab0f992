package views

import "time"

// OperationsListView is the /operations page: every bulk operation, newest
// first, filtered by state, kind and who started it.
type OperationsListView struct {
	Form OperationsFilterForm
	// States and Kinds are the filter's choices.
	States []Option
	Kinds  []Option
	Rows   []OperationRow
	// Invalid: the filter was refused; the form names the problems.
	Invalid   bool
	Narrowed  bool
	FirstPage bool
	NextURL   string // "" on the last page
	NewestURL string
}

// OperationsFilterForm holds the list's filter inputs as typed, with
// problems by field.
type OperationsFilterForm struct {
	State, Kind, Actor string
	Problems           map[string]string
}

// OperationRow is one operation of the list.
type OperationRow struct {
	ID        int64
	Href      string
	Kind      string // "replay" or "discard"
	State     string // as stored: whatever states there are, shown as they come
	StateText string
	StateKind string // how to colour it: "running", "ok", "warn", "error"
	Live      bool   // not finished
	Actor     string
	CreatedAt time.Time
	// Selection says what it acts on: a filter in words, an error group, or
	// how many ids; SelectionHref shows those letters ("" for ids).
	Selection     string
	SelectionHref string
	Matched       string
	Handled       string
	Percent       string
}

// InFlightNotice is one open operation as the banner on every page names
// it: "Replay #12 by alice: 4,210 of 20,000".
type InFlightNotice struct {
	ID    int64
	Verb  string // "Replay" or "Discard"
	Actor string
	State string
	// Note says where it is when that is not simply running ("waiting
	// for release"); "" while it runs.
	Note    string
	Handled string
	Matched string
	Href    string
}

// InFlightBanner is the banner's content: the newest open operations and
// how many more are open than are named.
type InFlightBanner struct {
	Operations []InFlightNotice
	More       int
}
