package handlers

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// Query strings are read here and nowhere else: each Parse function turns
// the text of a request into the store's typed filter, then holds it to the
// filter's own Validate, so that a filter from a query string, an API body
// or a stored operation obeys one set of rules.

// ParseFilter reads the dead-letter list's filter from a query string.
// Relative times resolve against now. Problems come back as a
// *dlq.ValidationError naming each bad field, so the page can say which
// input to fix.
func ParseFilter(v url.Values, now time.Time) (dlq.Filter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := dlq.Filter{Task: get("task"), Queue: get("queue"), Reason: dlq.Reason(get("reason")),
		ErrorClass: get("error_class"), Q: get("q"), Source: get("source"), Limit: dlq.DefaultLimit}
	groups, msg := parseGroups(v["fingerprint"])
	if msg != "" {
		problems["fingerprint"] = msg
	}
	if len(groups) == 1 {
		f.Fingerprint = groups[0]
	} else {
		f.Fingerprints = groups
	}
	f.Status = parseStatus(get("status"))
	f.Since, f.Until = parseTimeRange(get("since"), get("until"), now, problems)
	f.Limit = parseLimit(get("limit"), dlq.DefaultLimit, dlq.MaxLimit, problems)
	if s := get("cursor"); s != "" {
		c, err := dlq.ParseCursor(s)
		if err != nil {
			problems["cursor"] = "invalid cursor: start again from the newest page"
		} else {
			f.After = &c
		}
	}
	return f, validated(f.Validate(), problems)
}

// maskedSearch refuses f when its search has a qualifier on a key the
// masking policy m hides (dlq.Filter.MaskedQualifier), naming the problem
// under key, the input it came from ("q", or "filter.q" in a bulk body).
// The store would match nothing by such a key; this says why.
func maskedSearch(f dlq.Filter, m mask.Policy, key string) error {
	if msg := f.MaskedQualifier(m); msg != "" {
		return &dlq.ValidationError{Fields: map[string]string{key: msg}}
	}
	return nil
}

// parseStatus reads the status parameter: none is pending (the letters
// still waiting for someone, what an on-call engineer wants first), "all"
// (or "any") every status; anything else is checked by Validate.
func parseStatus(s string) dlq.Status {
	switch s {
	case "":
		return dlq.StatusPending
	case dlq.StatusAll, "any":
		return ""
	}
	return dlq.Status(s)
}

// parseGroups reads the error groups of a filter: one fingerprint
// parameter holding group ids separated by commas (the form the list's
// input and the CLI's --group carry unchanged), lower-cased, sorted, each
// once; Validate checks each. A repeated parameter is refused rather than
// read in part: a replay of fewer groups than the engineer named would
// look like success.
func parseGroups(raw []string) ([]string, string) {
	if len(raw) > 1 {
		return nil, "give the error groups in one fingerprint parameter, separated by commas"
	}
	if len(raw) == 0 {
		return nil, ""
	}
	var groups []string
	for _, s := range strings.Split(raw[0], ",") {
		if s = strings.ToLower(strings.TrimSpace(s)); s != "" {
			groups = append(groups, s)
		}
	}
	slices.Sort(groups)
	return slices.Compact(groups), ""
}

// parseLimit reads a page size: def when s is empty; a problem unless it
// is a whole number from 1 to max.
func parseLimit(s string, def, max int, problems map[string]string) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", max)
		return def
	}
	return n
}

// validated merges the problems a filter's Validate found into those its
// parsing found (the parser's words win: they quote what was typed), and
// returns them as one *dlq.ValidationError, or nil.
func validated(err error, problems map[string]string) error {
	var ve *dlq.ValidationError
	if errors.As(err, &ve) {
		for k, msg := range ve.Fields {
			if _, ok := problems[k]; !ok {
				problems[k] = msg
			}
		}
	} else if err != nil {
		return err
	}
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: maps.Clone(problems)}
	}
	return nil
}

// maxRelative bounds relative times ("7d") to what a person means.
const maxRelative = 10 * 366 * 24 * time.Hour

// relativePattern is an age: a number and a unit.
var relativePattern = regexp.MustCompile(`^(\d{1,6})\s*(m|min|h|d|w)$`)

// timeLayouts are the absolute times accepted, tried in order. A time
// without a zone (what an HTML datetime-local input sends) is taken as UTC,
// the zone the console shows every time in.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
}

// parseTimeRange reads a since/until pair, recording problems by key;
// Validate checks the range itself.
func parseTimeRange(since, until string, now time.Time, problems map[string]string) (dlq.TimeBound, dlq.TimeBound) {
	s, err := parseTimeBound(since, now)
	if err != nil {
		problems["since"] = err.Error()
	}
	u, err := parseTimeBound(until, now)
	if err != nil {
		problems["until"] = err.Error()
	}
	return s, u
}

// parseTimeBound reads "" (unset), a relative age ("90m", "24h", "7d",
// "2w": that long before now), RFC3339, or a zone-less date and time in
// UTC.
func parseTimeBound(s string, now time.Time) (dlq.TimeBound, error) {
	if s == "" {
		return dlq.TimeBound{}, nil
	}
	if m := relativePattern.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1]) // at most 6 digits: cannot fail
		unit := map[string]time.Duration{"m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
		if time.Duration(n) > maxRelative/unit { // checked before multiplying: no overflow
			return dlq.TimeBound{}, fmt.Errorf("must be at most ten years ago")
		}
		return dlq.TimeBound{Raw: s, At: now.Add(-time.Duration(n) * unit).UTC()}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return dlq.TimeBound{Raw: s, At: t.UTC()}, nil
		}
	}
	return dlq.TimeBound{}, fmt.Errorf("use a time like 2026-01-02T15:04 (UTC), RFC3339, or an age like 1h, 24h, 7d")
}

// ParseAuditFilter reads the audit trail's filter from a query string;
// relative times resolve against now. Problems come back as a
// *dlq.ValidationError.
func ParseAuditFilter(v url.Values, now time.Time) (dlq.AuditFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := dlq.AuditFilter{Actor: get("actor"), Action: get("action"), Limit: dlq.DefaultAuditLimit}
	f.DeadLetterID = parsePositive(get("dead_letter_id"), "dead_letter_id", problems)
	f.Before = parsePositive(get("cursor"), "cursor", problems)
	f.Since, f.Until = parseTimeRange(get("since"), get("until"), now, problems)
	switch get("hide_sign_ins") {
	case "", "0":
	case "1":
		f.HideSessions = true
	default:
		problems["hide_sign_ins"] = "must be 1 (hide sign-ins) or 0"
	}
	f.Limit = parseLimit(get("limit"), dlq.DefaultAuditLimit, dlq.MaxAuditLimit, problems)
	return f, validated(f.Validate(), problems)
}

// parsePositive reads an id: 0 when s is empty, a problem of key unless it
// is a positive whole number.
func parsePositive(s, key string, problems map[string]string) int64 {
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		problems[key] = "must be a positive whole number"
		return 0
	}
	return n
}

// ParseGroupFilter reads the groups page's filter from a query string, or
// returns a *dlq.ValidationError naming the bad fields.
func ParseGroupFilter(v url.Values) (dlq.GroupFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := dlq.GroupFilter{Task: get("task"), Sort: cmp.Or(get("sort"), dlq.GroupSortPending), Limit: dlq.DefaultGroupLimit}
	if s := get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > dlq.MaxGroupPage {
			problems["page"] = fmt.Sprintf("must be a whole number from 1 to %d", dlq.MaxGroupPage)
		} else {
			f.Page = n
		}
	}
	f.Limit = parseLimit(get("limit"), dlq.DefaultGroupLimit, dlq.MaxGroupLimit, problems)
	return f, validated(f.Validate(), problems)
}
