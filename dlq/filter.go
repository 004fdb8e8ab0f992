package dlq

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Page sizes of the dead-letter list.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// MinSearchLen is the shortest search term: the trigram index needs
	// three characters, and a shorter term would scan the whole table.
	MinSearchLen = 3
	maxSearchLen = 200
	// maxRelative bounds relative times ("7d") to what a person means.
	maxRelative = 10 * 366 * 24 * time.Hour
)

// StatusAll is the query-string spelling of "every status". The list
// defaults to pending letters, the ones still waiting for someone: that is
// what an on-call engineer opening the page wants to see first.
const StatusAll = "all"

// Filter narrows the dead-letter list and its exports. Every field has a
// query-string form (ParseFilter, Values), so a pasted URL shows the same
// view. The zero value of each field means "not filtered", except Status,
// which ParseFilter defaults to pending.
type Filter struct {
	Task       string
	Queue      string
	Reason     Reason
	Status     Status // "" is every status
	ErrorClass string
	// Fingerprint selects the letters of one error group, Fingerprints
	// those of any of several (an incident's groups, replayed as one).
	// ParseFilter fills Fingerprint for one group and Fingerprints for
	// more, never both; Groups reads them together.
	Fingerprint  string
	Fingerprints []string
	// Q is a substring searched for, case-insensitively, in the error
	// message, args and kwargs.
	Q     string
	Since TimeBound
	Until TimeBound
	Limit int
	// After continues the list after this position; nil is the newest page.
	After *Cursor
}

// TimeBound is one end of a time range: the text as written (kept, so a
// relative "24h" stays relative in links) and the instant it resolved to.
type TimeBound struct {
	Raw string
	At  time.Time
}

// IsZero reports whether the bound is unset.
func (b TimeBound) IsZero() bool { return b.Raw == "" }

var (
	// fingerprintPattern is an error group's id: 16 lower-case hex digits.
	fingerprintPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)
	relativePattern    = regexp.MustCompile(`^(\d{1,6})\s*(m|min|h|d|w)$`)
)

// MaxFilterGroups bounds the error groups one filter names: an incident
// spans a handful, and each group is one index walk of every ordered read.
const MaxFilterGroups = 50

// The absolute time layouts accepted, tried in order. A time without a zone
// (what an HTML datetime-local input sends) is taken as UTC, the zone the
// console shows every time in.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
}

// ParseFilter reads a filter from a query string. Relative times resolve
// against now. Problems come back as a *ValidationError naming each bad
// field, so the page can say which input to fix.
func ParseFilter(v url.Values, now time.Time) (Filter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := Filter{
		Task:       get("task"),
		Queue:      get("queue"),
		Reason:     Reason(get("reason")),
		ErrorClass: get("error_class"),
		Q:          get("q"),
		Limit:      DefaultLimit,
	}
	groups, msg := parseGroups(v["fingerprint"])
	if msg != "" {
		problems["fingerprint"] = msg
	}
	if len(groups) == 1 {
		f.Fingerprint = groups[0]
	} else {
		f.Fingerprints = groups
	}
	if msg := TaskNameProblem(f.Task); f.Task != "" && msg != "" {
		problems["task"] = msg
	}
	if msg := QueueNameProblem(f.Queue); f.Queue != "" && msg != "" {
		problems["queue"] = msg
	}
	if f.Reason != "" && !f.Reason.Valid() {
		problems["reason"] = "must be one of exhausted, permanent, lease_expired"
	}
	switch s := get("status"); s {
	case "":
		f.Status = StatusPending
	case StatusAll, "any":
		f.Status = ""
	default:
		f.Status = Status(s)
		if !f.Status.Valid() {
			problems["status"] = "must be one of pending, replayed, discarded, all"
		}
	}
	if f.ErrorClass != "" && (len(f.ErrorClass) > 200 || !printable(f.ErrorClass)) {
		problems["error_class"] = "must be at most 200 printable characters"
	}
	if f.Q != "" {
		switch n := len([]rune(f.Q)); {
		case n < MinSearchLen:
			problems["q"] = fmt.Sprintf("search for at least %d characters", MinSearchLen)
		case n > maxSearchLen || !printable(f.Q):
			problems["q"] = fmt.Sprintf("must be at most %d printable characters", maxSearchLen)
		}
	}
	f.Since, f.Until = parseTimeRange(get("since"), get("until"), now, problems)
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxLimit)
		} else {
			f.Limit = n
		}
	}
	if s := get("cursor"); s != "" {
		c, err := ParseCursor(s)
		if err != nil {
			problems["cursor"] = "invalid cursor: start again from the newest page"
		} else {
			f.After = &c
		}
	}
	if len(problems) > 0 {
		return f, &ValidationError{Fields: problems}
	}
	return f, nil
}

// parseGroups reads the error groups of a filter: one fingerprint
// parameter holding group ids separated by commas (the form the list's
// input, the CLI's --group and a stored filter all carry unchanged). It
// returns them sorted, each once, or a problem. A repeated parameter is
// refused rather than read in part: a replay of fewer groups than the
// engineer named would look like success.
func parseGroups(raw []string) ([]string, string) {
	if len(raw) > 1 {
		return nil, "give the error groups in one fingerprint parameter, separated by commas"
	}
	if len(raw) == 0 {
		return nil, ""
	}
	var groups []string
	for _, s := range strings.Split(raw[0], ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		switch {
		case s == "":
			continue
		case !fingerprintPattern.MatchString(s):
			return nil, fmt.Sprintf("%q is not an error group: a group id is 16 hex digits, as the groups page shows", ClipRunes(s, 40))
		}
		groups = append(groups, s)
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	if len(groups) > MaxFilterGroups {
		return nil, fmt.Sprintf("names %d error groups; at most %d", len(groups), MaxFilterGroups)
	}
	return groups, ""
}

// ClipRunes cuts s to at most n runes, so a problem quoting a bad value
// stays one line.
func ClipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
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

// parseTimeBound reads "" (unset), a relative age ("90m", "24h", "7d",
// "2w": that long before now), RFC3339, or a zone-less date and time in UTC.
// parseTimeRange reads a since/until pair, recording problems by key; an
// until before since is a problem of until.
func parseTimeRange(since, until string, now time.Time, problems map[string]string) (TimeBound, TimeBound) {
	s, err := parseTimeBound(since, now)
	if err != nil {
		problems["since"] = err.Error()
	}
	u, err := parseTimeBound(until, now)
	if err != nil {
		problems["until"] = err.Error()
	}
	if !s.IsZero() && !u.IsZero() && s.At.After(u.At) {
		problems["until"] = "must not be before since"
	}
	return s, u
}

func parseTimeBound(s string, now time.Time) (TimeBound, error) {
	if s == "" {
		return TimeBound{}, nil
	}
	if m := relativePattern.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1]) // at most 6 digits: cannot fail
		unit := map[string]time.Duration{"m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
		if time.Duration(n) > maxRelative/unit { // checked before multiplying: no overflow
			return TimeBound{}, fmt.Errorf("must be at most ten years ago")
		}
		d := time.Duration(n) * unit
		return TimeBound{Raw: s, At: now.Add(-d).UTC()}, nil
	}
	for _, layout := range timeLayouts {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if t.Before(cursorMinTime) || t.After(cursorMaxTime) {
			return TimeBound{}, fmt.Errorf("must be between 1970 and 3000")
		}
		return TimeBound{Raw: s, At: t.UTC()}, nil
	}
	return TimeBound{}, fmt.Errorf("use a time like 2026-01-02T15:04 (UTC), RFC3339, or an age like 1h, 24h, 7d")
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

// Values encodes f as a query string that ParseFilter reads back to the same
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
		f.Q != "" || !f.Since.IsZero() || !f.Until.IsZero() || f.Status != StatusPending
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
