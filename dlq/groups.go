package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
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

var groupOrder = map[string]string{
	GroupSortPending:  "pending DESC, last_seen DESC, fingerprint",
	GroupSortTotal:    "total DESC, last_seen DESC, fingerprint",
	GroupSortLastSeen: "last_seen DESC, fingerprint",
	GroupSortNewest:   "first_seen DESC, fingerprint",
	GroupSortLastHour: "last_hour DESC, pending DESC, last_seen DESC, fingerprint",
}

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

// ParseGroupFilter reads a GroupFilter from a query string, or returns a
// *ValidationError naming the bad fields.
func ParseGroupFilter(v url.Values) (GroupFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := GroupFilter{Task: get("task"), Sort: get("sort"), Limit: DefaultGroupLimit}
	if msg := TaskNameProblem(f.Task); f.Task != "" && msg != "" {
		problems["task"] = msg
	}
	if f.Sort == "" {
		f.Sort = GroupSortPending
	} else if _, ok := groupOrder[f.Sort]; !ok {
		problems["sort"] = "must be one of " + strings.Join(GroupSorts, ", ")
	}
	if s := get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxGroupPage {
			problems["page"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxGroupPage)
		} else {
			f.Page = n
		}
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxGroupLimit {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxGroupLimit)
		} else {
			f.Limit = n
		}
	}
	if len(problems) > 0 {
		return f, &ValidationError{Fields: problems}
	}
	return f, nil
}

const groupColumns = `fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen, ` + lastHourColumn

// lastHourColumn counts a group's letters of the last hour from the
// (fingerprint, failed_at) index. Only groups seen within the hour can have
// any, so the others cost nothing, and the count stops at 100,000 so a
// flood costs a bounded index range.
const lastHourColumn = `CASE WHEN last_seen > now() - interval '1 hour' THEN (
	SELECT count(*) FROM (SELECT 1 FROM dead_letters d WHERE d.fingerprint = error_groups.fingerprint
		AND d.failed_at > now() - interval '1 hour' LIMIT 100000) h) ELSE 0 END AS last_hour`

// groupSampleJoin finds, for each group g, the arguments of the newest
// letter whose message is the group's sample (the summary trigger keeps the
// newest letter's message): one probe of the (fingerprint, failed_at) index
// per group. It looks at the newest few letters only; a group whose sample
// is none of them (ties, a purge) gets no arguments, and its message is
// then hidden whole (sampleText). Such a group comes back with the JSON
// null rather than SQL NULL, which a json.RawMessage cannot scan (that
// used to fail the whole page with a 500).
const groupSampleJoin = `
LEFT JOIN LATERAL (
	SELECT x.args AS sample_args, x.kwargs AS sample_kwargs
	FROM (SELECT d.args, d.kwargs, d.error_message FROM dead_letters d
		WHERE d.fingerprint = g.fingerprint ORDER BY d.failed_at DESC, d.id DESC LIMIT 20) x
	WHERE x.error_message = g.sample_message LIMIT 1
) found ON true
CROSS JOIN LATERAL (SELECT coalesce(found.sample_args, 'null') AS sample_args,
	coalesce(found.sample_kwargs, 'null') AS sample_kwargs) sample`

// ListGroups returns the top groups in f's order.
func (s *Store) ListGroups(ctx context.Context, f GroupFilter) ([]ErrorGroup, error) {
	order, ok := groupOrder[f.Sort]
	if !ok {
		order = groupOrder[GroupSortPending]
	}
	limit := f.Limit
	if limit < 1 || limit > MaxGroupLimit {
		limit = DefaultGroupLimit
	}
	offset := 0
	if f.Page > 1 {
		offset = (min(f.Page, MaxGroupPage) - 1) * limit
	}
	q := `SELECT g.*, sample.* FROM (SELECT ` + groupColumns + ` FROM error_groups
		WHERE ($1::text IS NULL OR task = $1) AND (NOT $4 OR pending > 0)
		ORDER BY ` + order + ` LIMIT $2 OFFSET $3) g` + groupSampleJoin + ` ORDER BY ` + order
	fetch := limit
	if f.Peek {
		fetch++
	}
	var groups []ErrorGroup
	if err := s.db.SelectContext(ctx, &groups, q, nullable(f.Task), fetch, offset, f.PendingOnly); err != nil {
		return nil, fmt.Errorf("list error groups: %w", translate(err))
	}
	return groups, nil
}

// SparkDays is how many days a group's sparkline covers.
const SparkDays = 14

// groupInflowSQL reads the daily inflow of many groups at once: bucket 0
// is the oldest of the SparkDays UTC days ending with $2's day. The
// primary key (fingerprint, day) makes each group one short index range.
const groupInflowSQL = `
SELECT fingerprint, ($3::int - 1 - (($2::timestamptz AT TIME ZONE 'UTC')::date - day)) AS bucket, n
FROM dead_letter_inflow_daily
WHERE fingerprint = ANY($1)
	AND day > ($2::timestamptz AT TIME ZONE 'UTC')::date - $3::int
	AND day <= ($2::timestamptz AT TIME ZONE 'UTC')::date`

// GroupInflow returns, for each fingerprint, SparkDays daily letter counts,
// oldest first, the last being now's UTC day so far. One query serves
// every group on a page.
func (s *Store) GroupInflow(ctx context.Context, fingerprints []string, now time.Time) (map[string][]int64, error) {
	out := make(map[string][]int64, len(fingerprints))
	for _, fp := range fingerprints {
		out[fp] = make([]int64, SparkDays)
	}
	if len(fingerprints) == 0 {
		return out, nil
	}
	var rows []struct {
		Fingerprint string `db:"fingerprint"`
		Bucket      int    `db:"bucket"`
		N           int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &rows, groupInflowSQL, pq.Array(fingerprints), now.UTC(), SparkDays); err != nil {
		return nil, fmt.Errorf("group inflow: %w", translate(err))
	}
	for _, r := range rows {
		if series, ok := out[r.Fingerprint]; ok && r.Bucket >= 0 && r.Bucket < SparkDays {
			series[r.Bucket] += r.N
		}
	}
	return out, nil
}

// GroupHours is how many hourly buckets a group's page charts.
const GroupHours = 24

// groupHourlySQL reads one group's letters per hour from the hourly
// summary: its primary key (fingerprint, hour, queue) makes it one short
// index range.
const groupHourlySQL = `
SELECT hour AS bucket, sum(n)::bigint AS n FROM dead_letter_inflow
WHERE fingerprint = $1 AND hour >= $2 AND hour < $3 GROUP BY hour`

// GroupHourly returns a group's letters per UTC hour over the GroupHours
// hours ending with now's hour, oldest first, gaps filled with 0.
func (s *Store) GroupHourly(ctx context.Context, fingerprint string, now time.Time) ([]InflowBucket, error) {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-GroupHours * time.Hour)
	var got []InflowBucket
	if err := s.db.SelectContext(ctx, &got, groupHourlySQL, fingerprint, start, end); err != nil {
		return nil, fmt.Errorf("group hourly inflow: %w", translate(err))
	}
	return bucketize(got, start, end, time.Hour), nil
}
