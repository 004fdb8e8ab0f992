package letters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/argquery"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// listColumns is deadLetterColumns without the traceback and history, which
// can be large and which no list shows, and with the letter's source (one
// lookup of letter_sources' key per row). scanListRow reads them in this
// order.
const listColumns = `id, job_id, queue, task, args, kwargs, idempotency_key,
	error_class, error_message, attempts, max_attempts, reason,
	fingerprint, worker_version, enqueued_at, failed_at, replay_of, replayed_at,
	replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason, status,
	coalesce((SELECT ls.source FROM letter_sources ls WHERE ls.dead_letter_id = dead_letters.id), '` + dlq.RedriveSource + `') AS source`

// scanListRow reads one row of listColumns, in their order. Every page
// view reads a page of these: scanning into the fields by hand, rather
// than through sqlx's reflection, was a third of the list's time in Go.
func scanListRow(rows *sql.Rows, d *dlq.DeadLetter) error {
	return rows.Scan(&d.ID, &d.JobID, &d.Queue, &d.Task, &d.Args, &d.Kwargs, &d.IdempotencyKey,
		&d.ErrorClass, &d.ErrorMessage, &d.Attempts, &d.MaxAttempts, &d.Reason,
		&d.Fingerprint, &d.WorkerVersion, &d.EnqueuedAt, &d.FailedAt, &d.ReplayOf, &d.ReplayedAt,
		&d.ReplayedBy, &d.ReplayJobID, &d.DiscardedAt, &d.DiscardedBy, &d.DiscardReason, &d.Status, &d.Source)
}

// LetterSource is the relation a query of letters reads: every letter
// (the dead_letters view), or the pending ones only (pending_dead_letters,
// whose narrow rows carry every column a filter names, with indexes by
// time and by reason: 00101_letters.sql).
type LetterSource int

const (
	AllLetters LetterSource = iota
	PendingLetters
)

// Table is the relation's name.
func (s LetterSource) Table() string {
	if s == PendingLetters {
		return "pending_dead_letters"
	}
	return "dead_letters"
}

// WalksGroups reports whether an ordered read of f's letters from src (a
// page, a sample, a batch) walks each of its groups apart (eachGroupSQL):
// when it names several groups and reads every letter, by the
// fingerprint index.
func WalksGroups(f dlq.Filter, src LetterSource) bool {
	return src == AllLetters && len(f.Groups()) > 1
}

// EachGroupSQL is an ordered read of the letters of several groups, as one
// walk of the fingerprint index per group, merged. read returns the
// statement of the (id, failed_at) of the letters of the filter g (f
// narrowed to one of its groups), in order and at most limit, numbering
// its arguments after args and returning them with its own; of all the
// walks' letters, eachGroupSQL keeps the first limit in the same order.
//
// One statement with fingerprint = ANY(...) could not stop early: the
// index holds each group's letters in order, not their union, so it would
// read and sort every letter of every group for each page and each batch.
// A walk per group, each group a value of its own, is also planned as the
// single-group reads are: on the group's size (its statistics), where one
// plan for a group not known in advance would be made for an average group
// and read the large ones whole.
func EachGroupSQL(f dlq.Filter, args []any, order, limit string, read func(g dlq.Filter, args []any) (string, []any)) (string, []any) {
	walks := make([]string, 0, len(f.Groups()))
	for _, fp := range f.Groups() {
		g := f
		g.Fingerprint, g.Fingerprints = fp, nil
		var walk string
		walk, args = read(g, args)
		walks = append(walks, "("+walk+")")
	}
	return `SELECT id, failed_at FROM (` + strings.Join(walks, " UNION ALL ") + `) walks ORDER BY ` + order + ` LIMIT ` + limit, args
}

// NewestFirst is the order of every list: newest first, then by id.
const NewestFirst = `failed_at DESC, id DESC`

// FilterSource is where f's letters are read from. Pending letters come from
// their own table, whose indexes serve the pending views newest first and
// by reason. A filter on task, queue, error class or error group (and not
// on reason) is served better by that column's index on every letter,
// checking that each has a pending row on the way (most letters of a task
// or a group are pending), as before the letters were split; the pending
// table carries no index of its own for those, so that a new letter writes
// no more index entries than it did then.
func FilterSource(f dlq.Filter) LetterSource {
	if f.Status != dlq.StatusPending || QueriesArguments(f) {
		return AllLetters
	}
	if f.Reason == "" && (f.Task != "" || f.Queue != "" || f.ErrorClass != "" || len(f.Groups()) > 0) {
		return AllLetters
	}
	return PendingLetters
}

// QueriesArguments reports whether f's search has qualifiers on the
// arguments, which only the letters' own rows carry.
func QueriesArguments(f dlq.Filter) bool {
	n, err := f.Query()
	return err == nil && n != nil && len(argquery.Qualifiers(n)) > 0
}

// FilterWhere renders f's conditions, cursor included, as a WHERE clause with
// $n placeholders for a query of src; values only ever travel as
// arguments.
func FilterWhere(f dlq.Filter, src LetterSource, withCursor bool, argOffset int) (string, []any) {
	var clauses []string
	var args []any
	// Placeholders start after argOffset, so a caller can put its own
	// arguments ($1..$argOffset) before the filter's.
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(argOffset+len(args))
	}
	eq := func(col, v string) {
		if v != "" {
			clauses = append(clauses, col+" = "+arg(v))
		}
	}
	eq("task", f.Task)
	eq("queue", f.Queue)
	eq("reason", string(f.Reason))
	if c := statusCondition(f.Status, src); c != "" {
		clauses = append(clauses, c)
	}
	eq("error_class", f.ErrorClass)
	// One group is an equality, the range of the fingerprint index the
	// single-group reads are planned on. Several are one array argument
	// (the ordered reads walk them one at a time: eachGroupSQL).
	switch groups := f.Groups(); {
	case len(groups) == 1:
		eq("fingerprint", groups[0])
	case len(groups) > 1:
		clauses = append(clauses, "fingerprint = ANY("+arg(pq.Array(groups))+")")
	}
	if f.Q != "" {
		clauses = append(clauses, searchSQL(f, arg))
	}
	if c := f.Candidates; c != nil {
		clauses = append(clauses, candidatesSQL(*c, arg))
	}
	switch f.Source {
	case "":
	case dlq.RedriveSource:
		// Redrive's own letters are those no other source sent: the few
		// letters of other sources are each one probe of their key.
		clauses = append(clauses, "NOT EXISTS (SELECT 1 FROM letter_sources s WHERE s.dead_letter_id = id)")
	default:
		clauses = append(clauses, "id IN (SELECT dead_letter_id FROM letter_sources WHERE source = "+arg(f.Source)+")")
	}
	if !f.Since.IsZero() {
		clauses = append(clauses, "failed_at >= "+arg(f.Since.At))
	}
	if !f.Until.IsZero() {
		clauses = append(clauses, "failed_at < "+arg(f.Until.At))
	}
	if withCursor && f.After != nil {
		// A row comparison, which a btree on (failed_at DESC, id DESC)
		// turns into the start of its range scan.
		clauses = append(clauses, "(failed_at, id) < ("+arg(f.After.FailedAt)+", "+arg(f.After.ID)+")")
	}
	if len(clauses) == 0 {
		return "", nil
	}
	return "WHERE " + strings.Join(clauses, " AND "), args
}

// searchSQL is the condition of f's search box: a query with qualifiers
// on the arguments (argQueryWhere), or a plain substring of the error
// message, args and kwargs as the pages show them (masked),
// trigram-indexed in a side table a replay never updates
// (00102_search.sql). Only search rows built under the current mask
// policy count: one not rebuilt yet after a change may hold what the new
// policy hides. % and _ in the term are meant literally. A query Validate
// would refuse matches nothing.
func searchSQL(f dlq.Filter, arg func(any) string) string {
	n, err := f.Query()
	switch {
	case err != nil:
		return "FALSE"
	case n != nil:
		return "(" + argQueryWhere(n, arg) + ")"
	}
	return searchTextSQL(f.Q, arg)
}

// candidatesSQL narrows a read to the letters an ArgProbe found: a
// constant array, whose size the planner knows (it reads the letters by
// primary key when few), and the letters not yet indexed for it.
func candidatesSQL(c dlq.ArgCandidates, arg func(any) string) string {
	ids := pq.Int64Array(c.IDs)
	if ids == nil {
		ids = pq.Int64Array{}
	}
	cond := "id = ANY(" + arg(ids) + "::bigint[])"
	if c.QueuedFrom > 0 {
		return "(" + cond + " OR id >= " + arg(c.QueuedFrom) + ")"
	}
	return cond
}

// statusCondition is the status's condition in a query of src, "" for none.
//
// Of every letter (the view), a pending letter is one with a pending row:
// a semi-join, which the planner estimates well and, for a page, runs as
// one primary-key probe per letter along the list's index. A replayed or
// discarded letter is one whose outcome says so, looked up per letter by a
// scalar subquery: the planner cannot turn it into a join, so it too walks
// the list's index. The obvious spellings made it join the tables whole:
// status = 'x' on the view, or a join on dead_letter_outcomes, whose
// two-column key it estimates at one row a match.
func statusCondition(s dlq.Status, src LetterSource) string {
	switch {
	case s == "":
		return ""
	case src == PendingLetters && s == dlq.StatusPending:
		return ""
	case src == PendingLetters:
		return "FALSE"
	case s == dlq.StatusPending:
		return "id IN (SELECT id FROM pending_dead_letters)"
	case s == dlq.StatusReplayed:
		return outcomeIsSQL("replayed_at")
	case s == dlq.StatusDiscarded:
		return outcomeIsSQL("discarded_at")
	}
	// ParseFilter admits no other status.
	return "FALSE"
}

// outcomeIsSQL is true of a letter of dead_letters whose outcome has column
// set, NULL (so false) of a pending letter.
func outcomeIsSQL(column string) string {
	return `(SELECT o.` + column + ` IS NOT NULL FROM dead_letter_outcomes o
		WHERE o.failed_at = dead_letters.failed_at AND o.dead_letter_id = dead_letters.id)`
}

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func escapeLike(s string) string { return likeEscaper.Replace(s) }

// ListDeadLetters returns the page of letters f selects, newest first.
func (s *Store) ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error) {
	limit := f.Limit
	if limit < 1 || limit > dlq.MaxLimit {
		limit = dlq.DefaultLimit
	}
	page, err := s.listPage(ctx, f, limit)
	if err != nil {
		return dlq.DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
	}
	if f.SearchesText() {
		if page.NotYetSearchable, err = s.SearchBacklog(ctx); err != nil {
			return dlq.DeadLetterPage{}, fmt.Errorf("list dead letters: %w", err)
		}
	}
	return page, nil
}

// listPageSQL is the query of listPage and its arguments.
func listPageSQL(f dlq.Filter, limit int) (string, []any) {
	src := FilterSource(f)
	if WalksGroups(f, src) {
		walks, args := EachGroupSQL(f, []any{limit + 1}, NewestFirst, "$1", func(g dlq.Filter, args []any) (string, []any) {
			where, more := FilterWhere(g, src, true, len(args))
			return `SELECT id, failed_at FROM dead_letters ` + where + ` ORDER BY ` + NewestFirst + ` LIMIT $1`, append(args, more...)
		})
		return ByIDNewestFirstSQL(listColumns, `SELECT id FROM (`+walks+`) found`), args
	}
	where, args := FilterWhere(f, src, true, 0)
	if where == "" {
		// The first page of every letter, or of the pending ones, takes no
		// argument: its limit is written in, so that listPage can keep it
		// prepared with one plan for a page of that size. As a parameter,
		// the generic plan would take the limit for a tenth of the letters
		// and join their outcomes whole (EXPLAIN: 220 ms, not 0.2).
		return NewestFirstSQL(listColumns, src, "", strconv.Itoa(limit+1)), nil
	}
	args = append(args, limit+1)
	return NewestFirstSQL(listColumns, src, where, "$"+strconv.Itoa(len(args))), args
}

// NewestFirstSQL reads columns of the first limit letters of src that
// where (a WHERE clause, or "") selects, newest first. Letters found in
// pending_dead_letters are then read whole from the view by id.
func NewestFirstSQL(columns string, src LetterSource, where, limit string) string {
	page := ` ORDER BY ` + NewestFirst + ` LIMIT ` + limit
	if src == PendingLetters {
		return ByIDNewestFirstSQL(columns, `SELECT id FROM pending_dead_letters `+where+page)
	}
	return `SELECT ` + columns + ` FROM dead_letters ` + where + page
}

// ByIDNewestFirstSQL reads columns of the letters whose ids the query ids
// returns, newest first: what a narrower read found is read whole only
// once found.
func ByIDNewestFirstSQL(columns, ids string) string {
	return `SELECT ` + columns + ` FROM dead_letters WHERE id IN (` + ids + `) ORDER BY ` + NewestFirst
}

// listPage reads limit+1 rows: the extra row only tells whether there is a
// next page, without a second query.
func (s *Store) listPage(ctx context.Context, f dlq.Filter, limit int) (dlq.DeadLetterPage, error) {
	f, err := s.probe.Filter(ctx, s.db, f)
	if err != nil {
		return dlq.DeadLetterPage{}, err
	}
	q, args := listPageSQL(f, limit)
	if len(args) == 0 {
		// A first page with no filter, the console's most read: planned
		// once per connection and page size.
		args = []any{postgres.Prepared}
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return dlq.DeadLetterPage{}, postgres.Translate(err)
	}
	defer rows.Close()
	letters := make([]dlq.DeadLetter, 0, limit+1)
	for rows.Next() {
		letters = append(letters, dlq.DeadLetter{})
		if err := scanListRow(rows, &letters[len(letters)-1]); err != nil {
			return dlq.DeadLetterPage{}, postgres.Translate(err)
		}
	}
	if err := rows.Err(); err != nil {
		return dlq.DeadLetterPage{}, postgres.Translate(err)
	}
	page := dlq.DeadLetterPage{Letters: letters}
	if len(letters) > limit {
		page.Letters = letters[:limit]
		c := dlq.CursorAfter(page.Letters[limit-1])
		page.Next = &c
	}
	return page, nil
}

// countFromSummariesSQL sums the per task, queue and status counts the
// triggers keep; NULL parameters match everything.
const countFromSummariesSQL = `
SELECT coalesce(sum(n), 0) FROM dead_letter_counts
WHERE ($1::text IS NULL OR task = $1) AND ($2::text IS NULL OR queue = $2) AND ($3::text IS NULL OR status = $3)`

// CountDeadLetters counts the letters f selects (its cursor aside). It is
// exact and costs one summary lookup when f filters only on task, queue
// and status, or only on fingerprint and pending-or-all; otherwise it reads
// at most LetterCountCap+1 letters.
func (s *Store) CountDeadLetters(ctx context.Context, f dlq.Filter) (dlq.Count, error) {
	return s.CountDeadLettersWithin(ctx, f, dlq.DefaultCountBudget)
}

// CountDeadLettersWithin is CountDeadLetters with another time budget for
// the capped count (at least a millisecond).
func (s *Store) CountDeadLettersWithin(ctx context.Context, f dlq.Filter, budget time.Duration) (dlq.Count, error) {
	n, err := s.countDeadLetters(ctx, f, max(budget, time.Millisecond))
	if err != nil {
		return dlq.Count{}, fmt.Errorf("count dead letters: %w", err)
	}
	return n, nil
}

func (s *Store) countDeadLetters(ctx context.Context, f dlq.Filter, budget time.Duration) (dlq.Count, error) {
	// rest is what f narrows by besides what a summary counts by: with
	// the pending status, Narrowed reports whether anything is left.
	rest := f
	rest.Task, rest.Queue, rest.Status = "", "", dlq.StatusPending
	if !rest.Narrowed() {
		var n int64
		err := s.db.GetContext(ctx, &n, countFromSummariesSQL, postgres.Prepared, postgres.Nullable(f.Task), postgres.Nullable(f.Queue), postgres.Nullable(string(f.Status)))
		return dlq.Count{N: n, Exact: true}, postgres.Translate(err)
	}
	rest.Fingerprint, rest.Fingerprints = "", nil
	if !rest.Narrowed() && f.Task == "" && f.Queue == "" && (f.Status == "" || f.Status == dlq.StatusPending) {
		col := "total"
		if f.Status == dlq.StatusPending {
			col = "pending"
		}
		// A group that has no row has no letters: the sum counts it as 0.
		var n int64
		err := s.db.GetContext(ctx, &n, `SELECT coalesce(sum(`+col+`), 0) FROM error_groups WHERE fingerprint = ANY($1)`,
			pq.Array(f.Groups()))
		return dlq.Count{N: n, Exact: true}, postgres.Translate(err)
	}
	return s.countCapped(ctx, f, budget)
}

// countCapped counts up to LetterCountCap+1 letters within budget. Most
// filters are served by an index-only scan and finish in a few ms; a
// filter no index fits (a common search term with a rare status, say)
// could take a second to find 10,001 matches, and the page must not wait
// for a number: past the budget the count gives up and says so.
func (s *Store) countCapped(ctx context.Context, f dlq.Filter, budget time.Duration) (dlq.Count, error) {
	f, err := s.probe.Filter(ctx, s.db, f)
	if err != nil {
		return dlq.Count{}, err
	}
	src := FilterSource(f)
	where, args := FilterWhere(f, src, false, 0)
	args = append(args, dlq.LetterCountCap+1)
	q := `SELECT count(*) FROM (SELECT 1 FROM ` + src.Table() + ` ` + where + ` LIMIT $` + strconv.Itoa(len(args)) + `) capped`
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return dlq.Count{}, err
	}
	defer tx.Rollback()
	// SET LOCAL cannot take a parameter; the value is a constant.
	if _, err := tx.ExecContext(ctx, `SET LOCAL statement_timeout = `+strconv.FormatInt(budget.Milliseconds(), 10)); err != nil {
		return dlq.Count{}, err
	}
	var n int64
	if err := tx.GetContext(ctx, &n, q, args...); err != nil {
		var pqErr *pq.Error
		if errors.As(err, &pqErr) && pqErr.Code == "57014" && ctx.Err() == nil { // query_canceled by our timeout
			return dlq.Count{TooSlow: true}, nil
		}
		return dlq.Count{}, postgres.Translate(err)
	}
	if n > dlq.LetterCountCap {
		return dlq.Count{N: dlq.LetterCountCap, Exact: false}, nil
	}
	return dlq.Count{N: n, Exact: true}, nil
}
