package dlq

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/mask"
)

// Page sizes of the dead-letter list.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// MinSearchLen is the shortest search term: the trigram index needs
	// three characters, and a shorter term would scan the whole table.
	MinSearchLen = 3
	maxSearchLen = 200
)

// StatusAll is the query-string spelling of "every status". The list
// defaults to pending letters, the ones still waiting for someone: that is
// what an on-call engineer opening the page wants to see first.
const StatusAll = "all"

// Filter narrows the dead-letter list and its exports, and selects the
// letters of a bulk operation. It has one query-string form, read by
// handlers.ParseFilter and written by Values, so a pasted URL shows the
// same view; and one JSON form, its own fields, which the API's bulk body
// and an operation's stored selection carry (the page, Limit and After,
// is no part of it). Validate holds every form to the same rules. The
// zero value of each field means "not filtered"; a Status of "" is every
// status (the query string's "all"; a missing status there is pending).
type Filter struct {
	Task       string `json:"task,omitempty"`
	Queue      string `json:"queue,omitempty"`
	Reason     Reason `json:"reason,omitempty"`
	Status     Status `json:"status,omitempty"`
	ErrorClass string `json:"error_class,omitempty"`
	// Fingerprint selects the letters of one error group, Fingerprints
	// those of any of several (an incident's groups, replayed as one).
	// ParseFilter fills Fingerprint for one group and Fingerprints for
	// more, never both; Groups reads them together.
	Fingerprint  string   `json:"fingerprint,omitempty"`
	Fingerprints []string `json:"fingerprints,omitempty"`
	// Q is what the search box holds: a substring searched for,
	// case-insensitively, in the error message, args and kwargs; or, when
	// it holds a qualifier (kwargs.country:DE), a query of package
	// argquery's language (Query).
	Q string `json:"q,omitempty"`
	// Source selects the letters of one source: RedriveSource for
	// Redrive's own, or a system that sends its letters.
	Source string    `json:"source,omitempty"`
	Since  TimeBound `json:"since,omitzero"`
	Until  TimeBound `json:"until,omitzero"`
	// Limit is the page size; 0 is DefaultLimit.
	Limit int `json:"-"`
	// After continues the list after this position; nil is the newest page.
	After *Cursor `json:"-"`
	// Candidates, when set, narrows a read to the letters the store's
	// probe found its query's qualifiers may match (letters.ArgProbe). Like
	// the page, it is no part of the filter's forms: the store sets it
	// just before each read, and every letter read is still checked
	// against the whole filter.
	Candidates *ArgCandidates `json:"-"`
}

// ArgCandidates are the letters a filter's qualifiers on the arguments
// may match, as the store's index of argument values held them at the
// probe: those it found, and every letter not yet indexed.
type ArgCandidates struct {
	// IDs are the indexed letters whose values may match.
	IDs []int64
	// QueuedFrom, when not 0, is the smallest id still queued for
	// indexing: every letter from it on is a candidate too.
	QueuedFrom int64
}

// TimeBound is one end of a time range: the text as written (kept, so a
// relative "24h" stays relative in links) and the instant it resolved to.
// In JSON it is the instant alone, RFC 3339 in UTC: a stored or posted
// filter selects what it meant when it was read, however late it is run.
type TimeBound struct {
	Raw string
	At  time.Time
}

// MarshalJSON writes the instant.
func (b TimeBound) MarshalJSON() ([]byte, error) {
	return json.Marshal(b.At.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads an RFC 3339 instant; its text is then Raw.
func (b *TimeBound) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("a time bound is an RFC 3339 time: %w", err)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("a time bound is an RFC 3339 time: %w", err)
	}
	*b = TimeBound{Raw: s, At: at.UTC()}
	return nil
}

// IsZero reports whether the bound is unset.
func (b TimeBound) IsZero() bool { return b.Raw == "" }

// fingerprintPattern is an error group's id: 16 lower-case hex digits.
var fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// MaxFilterGroups bounds the error groups one filter names: an incident
// spans a handful, and each group is one index walk of every ordered read.
const MaxFilterGroups = 50

// Validate reports every field of f that is out of bounds, as a
// *ValidationError keyed by the query-string name of the field: a filter
// read from a query string (handlers.ParseFilter), from an API body, or
// from an operation's stored JSON is held to the same rules.
func (f Filter) Validate() error {
	problems := map[string]string{}
	f.fieldProblems(problems)
	if msg := SourceNameProblem(f.Source); f.Source != "" && msg != "" {
		problems["source"] = msg
	}
	if msg := searchProblem(f.Q); msg != "" {
		problems["q"] = msg
	}
	if msg := groupsProblem(f.Groups()); msg != "" {
		problems["fingerprint"] = msg
	}
	timeRangeProblems(f.Since, f.Until, problems)
	if f.Limit < 0 || f.Limit > MaxLimit {
		problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxLimit)
	}
	if len(problems) > 0 {
		return &ValidationError{Fields: problems}
	}
	return nil
}

// fieldProblems notes the problems of the fields that name one thing: a
// task, a queue, a reason, a status, an error class.
func (f Filter) fieldProblems(problems map[string]string) {
	if msg := TaskNameProblem(f.Task); f.Task != "" && msg != "" {
		problems["task"] = msg
	}
	if msg := QueueNameProblem(f.Queue); f.Queue != "" && msg != "" {
		problems["queue"] = msg
	}
	if f.Reason != "" && !f.Reason.Valid() {
		problems["reason"] = "must be one of exhausted, permanent, lease_expired"
	}
	if f.Status != "" && !f.Status.Valid() {
		problems["status"] = "must be one of pending, replayed, discarded, all"
	}
	if f.ErrorClass != "" && (len(f.ErrorClass) > 200 || !printable(f.ErrorClass)) {
		problems["error_class"] = "must be at most 200 printable characters"
	}
}

// searchProblem says what is wrong with a search term or query, ""
// when nothing.
func searchProblem(q string) string {
	if q == "" {
		return ""
	}
	if _, err := argquery.Parse(q); err != nil {
		return err.Error()
	}
	if argquery.HasQualifier(q) {
		if len([]rune(q)) > maxSearchLen || !printable(q) {
			return fmt.Sprintf("must be at most %d printable characters", maxSearchLen)
		}
		return ""
	}
	switch n := len([]rune(q)); {
	case n < MinSearchLen:
		return fmt.Sprintf("search for at least %d characters", MinSearchLen)
	case n > maxSearchLen || !printable(q):
		return fmt.Sprintf("must be at most %d printable characters", maxSearchLen)
	}
	return ""
}

// groupsProblem says what is wrong with the error groups a filter names:
// an id that is not one, or more than MaxFilterGroups.
func groupsProblem(groups []string) string {
	for _, g := range groups {
		if !fingerprintPattern.MatchString(g) {
			return fmt.Sprintf("%q is not an error group: a group id is 16 hex digits, as the groups page shows", ClipRunes(g, 40))
		}
	}
	if len(groups) > MaxFilterGroups {
		return fmt.Sprintf("names %d error groups; at most %d", len(groups), MaxFilterGroups)
	}
	return ""
}

// timeRangeProblems notes a bound outside the times a cursor can hold, and
// an until before since, which is until's problem.
func timeRangeProblems(since, until TimeBound, problems map[string]string) {
	for key, b := range map[string]TimeBound{"since": since, "until": until} {
		if !b.IsZero() && (b.At.Before(cursorMinTime) || b.At.After(cursorMaxTime)) {
			problems[key] = "must be between 1970 and 3000"
		}
	}
	if _, bad := problems["until"]; !bad && !since.IsZero() && !until.IsZero() && since.At.After(until.At) {
		problems["until"] = "must not be before since"
	}
}

// ClipRunes cuts s to at most n runes, so a problem quoting a bad value
// stays one line.
func ClipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// Query returns the tree of f's search when it is a query with
// qualifiers on the arguments; nil when it is a plain substring search
// or none. Validate has refused a query that cannot be read.
func (f Filter) Query() (argquery.Node, error) {
	if f.Q == "" {
		return nil, nil
	}
	return argquery.Parse(f.Q)
}

// SearchesText reports whether f searches the letters' search text (whose
// rows are built a moment after a letter is written), rather than only
// their columns.
func (f Filter) SearchesText() bool {
	if f.Q == "" {
		return false
	}
	n, err := f.Query()
	return err != nil || n == nil || argquery.HasText(n)
}

// Groups returns the error groups f selects letters of (Fingerprint and
// Fingerprints together), sorted, each once; none when f does not filter
// by group.
func (f Filter) Groups() []string {
	if len(f.Fingerprints) == 0 {
		if f.Fingerprint == "" {
			return nil
		}
		return []string{f.Fingerprint}
	}
	groups := slices.Clone(f.Fingerprints)
	if f.Fingerprint != "" {
		groups = append(groups, f.Fingerprint)
	}
	slices.Sort(groups)
	return slices.Compact(groups)
}

// printable refuses invalid UTF-8 and control characters, which Postgres
// would reject (a 500) or which can only be a mistake.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// Values encodes f as a query string that handlers.ParseFilter reads back to the same
// filter. Defaults (pending status, the default limit) are left out, so
// links stay short.
func (f Filter) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("task", f.Task)
	set("queue", f.Queue)
	set("reason", string(f.Reason))
	switch f.Status {
	case StatusPending:
	case "":
		v.Set("status", StatusAll)
	default:
		v.Set("status", string(f.Status))
	}
	set("error_class", f.ErrorClass)
	set("fingerprint", strings.Join(f.Groups(), ","))
	set("q", f.Q)
	set("source", f.Source)
	set("since", f.Since.Raw)
	set("until", f.Until.Raw)
	if f.Limit != DefaultLimit && f.Limit != 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.After != nil {
		v.Set("cursor", f.After.String())
	}
	return v
}

// Narrowed reports whether f filters by anything besides the default
// status: an empty list then means "nothing matched", not "nothing is dead".
func (f Filter) Narrowed() bool {
	return f.Task != "" || f.Queue != "" || f.Reason != "" || f.ErrorClass != "" || len(f.Groups()) > 0 ||
		f.Q != "" || f.Source != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.Status != StatusPending
}

// Pinned encodes f as a bulk operation selects by it: no page size, no
// cursor, and relative times ("24h") fixed to the instant they meant when
// the filter was parsed. A bulk form carries it, and an operation stores it,
// so that confirming a minute later, or resuming tomorrow, selects what was
// shown and confirmed.
func (f Filter) Pinned() url.Values {
	v := f.FirstPage().Values()
	v.Del("limit")
	if !f.Since.IsZero() {
		v.Set("since", f.Since.At.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		v.Set("until", f.Until.At.UTC().Format(time.RFC3339Nano))
	}
	return v
}

// FirstPage returns f without its cursor: the newest page of the same view.
func (f Filter) FirstPage() Filter {
	f.After = nil
	return f
}

// MaskedQualifier says which qualifier of f's query names a key the
// masking policy m hides, "" when none does. The pages show such a value
// as mask.Placeholder to everyone (only an audited reveal of one letter
// shows it), so a search by it, or a count of what it matches, would
// tell what the pages hide: it is refused, and the store matches nothing
// by such a key whatever the caller (letters.FilterWhere).
func (f Filter) MaskedQualifier(m mask.Policy) string {
	n, err := f.Query()
	if err != nil || n == nil {
		return ""
	}
	for _, c := range argquery.Qualifiers(n) {
		for _, k := range c.Path.Keys() {
			if m.Sensitive(k) {
				return fmt.Sprintf("%s is masked (its key %q is secret by the masking policy): its values cannot be searched", c.Path, k)
			}
		}
	}
	return ""
}
