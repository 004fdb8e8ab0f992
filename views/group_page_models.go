package views

import (
	"strconv"
	"time"
)

// GroupPageView is one error group's page.
type GroupPageView struct {
	// Pause offers to pause the group's task (nil: no pause link).
	Pause *PauseLinks
	// Incident is the same failure in other tasks, nil when there is none.
	Incident    *IncidentStripView
	Fingerprint string
	Task        string
	ErrorClass  string
	// Message is the group's sample message, masked.
	Message string
	// Template is the group's learned template, the page's lead; empty
	// when none is kept (the sample message stands in).
	Template []TemplatePart
	// Variables says what varies between the group's newest letters, one
	// entry per variable of Template.
	Variables []GroupVariableView
	// VariablesOf says which letters Variables counts: "its 47 letters",
	// "the newest 2,000 of 12,345 letters".
	VariablesOf string
	// Unfit counts the letters read that do not fit the template (filed
	// under the group before an operator split it); "" when none.
	Unfit string
	// EditHref is the page to merge or split the group (only for users
	// who can act).
	EditHref string
	// Minutely is the inflow per minute over the last 3 hours, the
	// minute the group was first seen marked.
	Minutely   BarChart
	FirstSeen  time.Time
	LastSeen   time.Time
	Pending    string
	HasPending bool
	Total      string
	LastHour   string
	New        bool
	Hourly     BarChart
	Daily      BarChart
	// SampleID is the newest letter, whose (masked) traceback is shown.
	SampleID   int64
	SampleHref string
	// TestRunHref opens the newest letter's test run form, whose arguments
	// a test job of the group runs with; "" when there is none to run.
	TestRunHref string
	Traceback   string
	Letters     DeadLetterResults
	CanAct      bool
	// Links: the group's pending letters, all its letters, the other
	// groups of its task, and the bulk confirmations for the group.
	PendingHref string
	AllHref     string
	TaskHref    string
	ReplayHref  string
	DiscardHref string
}

// TemplatePart is a piece of a group's template: constant words, or a
// variable (Var > 0, numbered from 1 in the template's order).
type TemplatePart struct {
	Text string
	Var  int
	// Hint says what the variable took ("2 values, most often …").
	Hint string
}

// VarLabel names variable n as the page marks it: ‹1›, ‹2›, ….
func VarLabel(n int) string { return "‹" + strconv.Itoa(n) + "›" }

// GroupVariableView is one variable of a group's template and the values
// its letters gave it.
type GroupVariableView struct {
	N int
	// Label is the variable in its place in the template, what it reads
	// as: the word before it ("host ‹2›"), with the variables between
	// ("for ‹2› ‹3›"), or the word after a variable that starts the
	// template ("‹1› timed").
	Label    []TemplatePart
	Distinct string
	// Prefix is the start all values share ("pi_"), "" when none.
	Prefix string
	// AllDifferent: each letter gave its own value (an id); the most
	// common ones would say nothing.
	AllDifferent bool
	Values       []GroupValueView
}

// DistinctNoun is what follows the number of distinct values.
func (v GroupVariableView) DistinctNoun() string {
	if v.Distinct == "1" {
		return "value"
	}
	return "distinct values"
}

// GroupValueView is one common value of a variable.
type GroupValueView struct {
	// Value is masked as the letter page masks; Empty marks a variable
	// that took no word.
	Value string
	Empty bool
	// Hidden: masking hid (part of) the value.
	Hidden bool
	// Share is "41 of 47", Percent its rounded share.
	Share   string
	Percent int
	// Href lists the group's letters that mention the value ("" when
	// it cannot be searched for: hidden, or too short).
	Href string
}
