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
	// SampleArgs and SampleKwargs are the arguments of the letter the
	// sample message comes from, so that the message can be masked as
	// that letter's is (Masker.MaskText); never shown themselves.
	SampleArgs   json.RawMessage `db:"sample_args" json:"-"`
	SampleKwargs json.RawMessage `db:"sample_kwargs" json:"-"`
}

// The orders the groups page offers. Each maps to a fixed ORDER BY: sort
// keys never reach SQL as text from the request.
const (
	GroupSortPending  = "pending"
	GroupSortTotal    = "total"
	GroupSortLastSeen = "last_seen"
)

// GroupSorts lists the orders in display order.
var GroupSorts = []string{GroupSortPending, GroupSortTotal, GroupSortLastSeen}

var groupOrder = map[string]string{
	GroupSortPending:  "pending DESC, last_seen DESC, fingerprint",
	GroupSortTotal:    "total DESC, last_seen DESC, fingerprint",
	GroupSortLastSeen: "last_seen DESC, fingerprint",
}

// Group list sizes: the page is a bounded top-N, not a paginated list. A
// fleet with more than 200 distinct live bugs narrows by task.
const (
	DefaultGroupLimit = 200
	MaxGroupLimit     = 500
)

// GroupFilter selects and orders error groups.
type GroupFilter struct {
	Task  string
	Sort  string
	Limit int
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
		problems["sort"] = "must be one of pending, total, last_seen"
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

const groupColumns = `fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen`

// groupSampleJoin finds, for each group g, the arguments of the newest
// letter whose message is the group's sample (the summary trigger keeps the
// newest letter's message): one probe of the (fingerprint, failed_at) index
// per group. It looks at the newest few letters only; a group whose sample
// is none of them (ties, a purge) gets no arguments, and its message is
// then hidden whole (sampleText).
const groupSampleJoin = `
LEFT JOIN LATERAL (
	SELECT x.args AS sample_args, x.kwargs AS sample_kwargs
	FROM (SELECT d.args, d.kwargs, d.error_message FROM dead_letters d
		WHERE d.fingerprint = g.fingerprint ORDER BY d.failed_at DESC, d.id DESC LIMIT 20) x
	WHERE x.error_message = g.sample_message LIMIT 1
) sample ON true`

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
	q := `SELECT g.*, sample.* FROM (SELECT ` + groupColumns + ` FROM error_groups WHERE ($1::text IS NULL OR task = $1)
		ORDER BY ` + order + ` LIMIT $2) g` + groupSampleJoin + ` ORDER BY ` + order
	var groups []ErrorGroup
	if err := s.db.SelectContext(ctx, &groups, q, nullable(f.Task), limit); err != nil {
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

// MaskSample masks a group's sample message as its letter's is, with that
// letter's arguments. Without them (the letter was not found) nobody can
// say what the message quotes, so it is hidden whole when anything is
// masked at all.
func (m Masker) MaskSample(msg string, args, kwargs json.RawMessage) string {
	if args == nil && kwargs == nil && msg != "" && (len(m.Patterns()) > 0 || len(m.TextPatterns()) > 0) {
		return MaskPlaceholder
	}
	return m.MaskText(msg, args, kwargs)
}
