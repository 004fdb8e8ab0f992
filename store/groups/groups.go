package groups

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// GroupColumns are the columns a group is read with, its sample letter's
// joined by GroupSampleJoin.
const GroupColumns = `fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen, ` + lastHourColumn

// lastHourColumn counts a group's letters of the last hour from the
// (fingerprint, failed_at) index. Only groups seen within the hour can have
// any, so the others cost nothing, and the count stops at 100,000 so a
// flood costs a bounded index range.
const lastHourColumn = `CASE WHEN last_seen > now() - interval '1 hour' THEN (
	SELECT count(*) FROM (SELECT 1 FROM dead_letters d WHERE d.fingerprint = error_groups.fingerprint
		AND d.failed_at > now() - interval '1 hour' LIMIT 100000) h) ELSE 0 END AS last_hour`

// GroupSampleJoin finds, for each group g, the arguments of the newest
// letter whose message is the group's sample (the summary trigger keeps the
// newest letter's message): one probe of the (fingerprint, failed_at) index
// per group. It looks at the newest few letters only; a group whose sample
// is none of them (ties, a purge) gets no arguments, and its message is
// then hidden whole (sampleText). Such a group comes back with the JSON
// null rather than SQL NULL, which a json.RawMessage cannot scan (that
// used to fail the whole page with a 500).
const GroupSampleJoin = `
LEFT JOIN LATERAL (
	SELECT x.args AS sample_args, x.kwargs AS sample_kwargs
	FROM (SELECT d.args, d.kwargs, d.error_message FROM dead_letters d
		WHERE d.fingerprint = g.fingerprint ORDER BY d.failed_at DESC, d.id DESC LIMIT 20) x
	WHERE x.error_message = g.sample_message LIMIT 1
) found ON true
CROSS JOIN LATERAL (SELECT coalesce(found.sample_args, 'null') AS sample_args,
	coalesce(found.sample_kwargs, 'null') AS sample_kwargs) sample`

// groupOrder is the ORDER BY of each of the group list's sorts
// (dlq.GroupSorts).
var groupOrder = map[string]string{
	dlq.GroupSortPending:  "pending DESC, last_seen DESC, fingerprint",
	dlq.GroupSortTotal:    "total DESC, last_seen DESC, fingerprint",
	dlq.GroupSortLastSeen: "last_seen DESC, fingerprint",
	dlq.GroupSortNewest:   "first_seen DESC, fingerprint",
	dlq.GroupSortLastHour: "last_hour DESC, pending DESC, last_seen DESC, fingerprint",
}

// ListGroups returns the top groups in f's order.
func (s *Store) ListGroups(ctx context.Context, f dlq.GroupFilter) ([]dlq.ErrorGroup, error) {
	order, ok := groupOrder[f.Sort]
	if !ok {
		order = groupOrder[dlq.GroupSortPending]
	}
	limit := f.Limit
	if limit < 1 || limit > dlq.MaxGroupLimit {
		limit = dlq.DefaultGroupLimit
	}
	offset := 0
	if f.Page > 1 {
		offset = (min(f.Page, dlq.MaxGroupPage) - 1) * limit
	}
	q := `SELECT g.*, sample.* FROM (SELECT ` + GroupColumns + ` FROM error_groups
		WHERE ($1::text IS NULL OR task = $1) AND (NOT $4 OR pending > 0)
		ORDER BY ` + order + ` LIMIT $2 OFFSET $3) g` + GroupSampleJoin + ` ORDER BY ` + order
	fetch := limit
	if f.Peek {
		fetch++
	}
	var groups []dlq.ErrorGroup
	if err := s.db.SelectContext(ctx, &groups, q, postgres.Nullable(f.Task), fetch, offset, f.PendingOnly); err != nil {
		return nil, fmt.Errorf("list error groups: %w", postgres.Translate(err))
	}
	return groups, nil
}

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
		out[fp] = make([]int64, dlq.SparkDays)
	}
	if len(fingerprints) == 0 {
		return out, nil
	}
	var rows []struct {
		Fingerprint string `db:"fingerprint"`
		Bucket      int    `db:"bucket"`
		N           int64  `db:"n"`
	}
	if err := s.db.SelectContext(ctx, &rows, groupInflowSQL, pq.Array(fingerprints), now.UTC(), dlq.SparkDays); err != nil {
		return nil, fmt.Errorf("group inflow: %w", postgres.Translate(err))
	}
	for _, r := range rows {
		if series, ok := out[r.Fingerprint]; ok && r.Bucket >= 0 && r.Bucket < dlq.SparkDays {
			series[r.Bucket] += r.N
		}
	}
	return out, nil
}

// groupHourlySQL reads one group's letters per hour from the hourly
// summary: its primary key (fingerprint, hour, queue) makes it one short
// index range.
const groupHourlySQL = `
SELECT hour AS bucket, sum(n)::bigint AS n FROM dead_letter_inflow
WHERE fingerprint = $1 AND hour >= $2 AND hour < $3 GROUP BY hour`

// GroupHourly returns a group's letters per UTC hour over the GroupHours
// hours ending with now's hour, oldest first, gaps filled with 0.
func (s *Store) GroupHourly(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error) {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	start := end.Add(-dlq.GroupHours * time.Hour)
	var got []dlq.InflowBucket
	if err := s.db.SelectContext(ctx, &got, groupHourlySQL, fingerprint, start, end); err != nil {
		return nil, fmt.Errorf("group hourly inflow: %w", postgres.Translate(err))
	}
	return dlq.Bucketize(got, start, end, time.Hour), nil
}
