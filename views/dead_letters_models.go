package views

import (
	"sort"
	"strconv"
	"time"
)

// Option is one choice of a <select>.
type Option struct {
	Value, Label string
}

// DeadLetterFilterForm holds the filter inputs as the user typed them, so a
// refused filter comes back with its text intact and the problem named.
type DeadLetterFilterForm struct {
	Task, Queue, Reason, Status, ErrorClass, Fingerprint, Q, Source, Since, Until, Limit string
	// Problems maps a field name to what is wrong with it.
	Problems map[string]string
}

// DeadLetterRow is one line of the dead-letter list.
type DeadLetterRow struct {
	ID          int64
	Href        string
	Task        string
	Queue       string
	ErrorClass  string
	Message     string // shortened for the cell
	MessageFull string // for the hover title (itself capped)
	Attempts    string // "3/5"
	Reason      string
	Status      string
	FailedAt    time.Time
	// Source names the system that sent the letter; empty for Redrive's
	// own.
	Source string
}

// DeadLettersView is the dead-letter list page.
type DeadLettersView struct {
	Form     DeadLetterFilterForm
	Reasons  []Option
	Statuses []Option
	Limits   []Option
	Results  DeadLetterResults
	// Invalid is set when the filter was refused: the form shows the
	// problems and no results are shown.
	Invalid bool
	// PauseTask is the one task the list shows (a task or a group's
	// filter), offered a pause link; "" offers none.
	PauseTask string
	Pause     *PauseLinks
}

// DeadLetterResults is the part of the list page that a filter changes:
// the count, the table and the pager. htmx swaps it alone.
type DeadLetterResults struct {
	Rows []DeadLetterRow
	// Count is "1,234", or "10,000+" when the count stopped at its cap.
	Count string
	// CountExact is false when Count is a lower bound; CountNote then says why.
	CountExact bool
	CountNote  string
	// StatusWord is "pending", "replayed", "discarded" or "" for all.
	StatusWord string
	// Narrowed: an empty list means the filter matched nothing, rather
	// than that nothing is dead.
	Narrowed   bool
	FirstPage  bool
	NextURL    string // "" on the last page
	NewestURL  string // the first page of the same filter
	ClearURL   string
	ExportCSV  string
	ExportJSON string
	// NotYetSearchable, on a search, counts the letters written too
	// recently to be indexed for search: the results cannot include them.
	NotYetSearchable int64
	// NewerURL is polled for letters newer than the page's newest ("" for
	// no poll).
	NewerURL string

	// The bulk form: whether the requester may act, the CSRF token, and the
	// filter (no page, no cursor) that "select all matching" acts on.
	CanAct      bool
	CSRFToken   string
	FilterQuery string

	// ArgKeys are the keys of the arguments of the letters in view, as
	// suggestions for the search.
	ArgKeys []ArgKeySuggestion
}

// DeadLetterDetailView is the page of one dead letter.
type DeadLetterDetailView struct {
	ID    int64
	JobID int64
	// Source and ExternalID say where a letter another system sent came
	// from, and its id there; empty for Redrive's own, whose job JobID is.
	Source     string
	ExternalID string
	// SourceNote says what ExternalID is in its source, when Redrive knows
	// (a River job and its attempt); empty otherwise.
	SourceNote string
	// SourceExtra is what else the source said of the letter (a River
	// job's priority and tags), for the facts; empty when nothing.
	SourceExtra    string
	Task           string
	Queue          string
	Status         string
	Reason         string
	Why            string // the reason in words
	AttemptCount   string // "3/5"
	IdempotencyKey string
	EnqueuedAt     time.Time
	FailedAt       time.Time
	WorkerVersion  string
	Fingerprint    string
	GroupHref      string
	ListHref       string // the list of this letter's group
	CrumbHref      string // the list this letter was opened from, filter kept

	Args, Kwargs         string // pretty-printed JSON
	ArgsNote, KwargsNote string // set when the payload was too large to show whole
	// ArgsMasked: some values are hidden (reads.Masked); an
	// operator may reveal them.
	ArgsMasked bool

	ErrorClass   string
	ErrorMessage string

	Traceback TracebackView
	History   []AttemptView

	// Lineage.
	ReplayOf     int64 // 0 when this letter is not a replay
	ReplayJobID  int64 // 0 when this letter has not been replayed
	ReplayedAt   *time.Time
	ReplayedBy   string
	LaterLetters []int64
	DiscardedAt  *time.Time
	DiscardedBy  string
	DiscardNote  string

	// Actions is the action panel; Audit the letter's own audit entries,
	// newest first (AuditMore: there are older ones, on the audit page).
	Actions LetterActionsView
	// TestRuns is the test runs panel; nil when there is nothing to show
	// (no test job, and the requester may not run one).
	TestRuns  *TestRunsView
	Audit     []AuditRow
	AuditMore bool
	AuditHref string
}

// TracebackView is a traceback split for display: the first lines always
// show, the rest behind a <details>.
type TracebackView struct {
	Head  string // the first lines
	Rest  string // the remaining lines; "" when short
	Full  string // the whole text, for the copy button
	Lines int
	// Note says the traceback was cut before it was sent, and how much.
	Note string
}

// AttemptView is one attempt in the detail page's timeline.
type AttemptView struct {
	N           int
	At          time.Time
	Host        string
	Worker      string
	Version     string
	ErrorClass  string
	Message     string
	Duration    string // "" when unknown
	RetryAfter  string // "retried after 2.3 s"; "" when not retried
	Outcome     string // "retry", "dead", "lease_expired", "interrupted"
	OutcomeText string
	Traceback   string
	Logs        AttemptLogs // what the task logged; empty when nothing
	LogsURL     string      // "" when no logs link is configured
}

// GroupsView is the error-groups page.
type GroupsView struct {
	Task     string
	Sort     string
	Sorts    []Option
	Rows     []GroupRow
	Limit    int
	Problems map[string]string
	// Pause offers each row's task a pause link (nil: no pause links).
	Pause *PauseLinks
	// Page is the page shown (1-based); PrevHref and NextHref link to its
	// neighbours, "" at either end.
	Page     int
	PrevHref string
	NextHref string
}

// GroupRow is one error group.
type GroupRow struct {
	Fingerprint   string
	Task          string
	ErrorClass    string
	SampleMessage string
	SampleFull    string
	Total         string
	Pending       string
	HasPending    bool
	FirstSeen     time.Time
	LastSeen      time.Time
	ListHref      string // pending letters of the group
	AllHref       string // every letter of the group
	Href          string // the group's page
	LastHour      string
	New           bool // first seen within the last hour
	Spiking       bool // the last hour far above its usual rate
	Spark         Spark
}

// problemOrder lists a form's problem fields in a stable order.
func problemOrder(problems map[string]string) []string {
	keys := make([]string, 0, len(problems))
	for k := range problems {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// plural picks the word for a formatted count: "1 letter", "10,000+ letters".
func plural(count, one, many string) string {
	if count == "1" {
		return one
	}
	return many
}

func int64String(n int64) string { return strconv.FormatInt(n, 10) }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// filterHint is the hover text of a filter input: its problem, if any, or
// how to write a time.
func filterHint(name string, problems map[string]string) string {
	if p := problems[name]; p != "" {
		return p
	}
	if name == "since" || name == "until" {
		return "An age (90m, 24h, 7d, 2w) or a UTC time (2026-01-02T15:04, or RFC3339 with a zone)"
	}
	if name == "q" {
		return `Text, or qualifiers on the arguments: kwargs.customer_id:cus_9, args.0:42, kwargs.amount>100, kwargs.name:"Jane Doe"; combine with and, or, not and ( )`
	}
	return ""
}

// fieldLabels names filter fields as their inputs are labelled.
var fieldLabels = map[string]string{
	"q": "Search", "task": "Task", "queue": "Queue", "status": "Status", "reason": "Reason",
	"error_class": "Error class", "fingerprint": "Error group", "since": "Failed since",
	"until": "Failed before", "limit": "Per page", "cursor": "Page", "sort": "Sort by",
}

// fieldLabel is the label of a filter field, or the field's own name.
func fieldLabel(field string) string {
	if l, ok := fieldLabels[field]; ok {
		return l
	}
	return field
}

// ArgKeySuggestion is a key of the arguments of the letters in view, for
// the search: its path as a qualifier names it (kwargs.country), how many
// of the letters hold it, and its common values.
type ArgKeySuggestion struct {
	Path    string
	Letters int
	Values  []ArgValueSuggestion
}

// ArgValueSuggestion is a common value of a key: the qualifier that
// selects it, how many letters in view hold it, and the list with the
// qualifier added to the search.
type ArgValueSuggestion struct {
	Qualifier string
	Value     string
	Letters   int
	Href      string
}
