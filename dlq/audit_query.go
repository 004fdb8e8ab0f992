package dlq

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lib/pq"
)

// Reading the audit trail: the /audit page, its exports, the API, and each
// letter's own history. Entries are listed newest first by id, which is the
// order the chain was written in (appendAudit serialises writers), and
// continue with a keyset cursor on id: the next page holds entries with a
// smaller id, found by one range scan of the primary key however deep.

// AuditActions lists every action an entry may record, for the filter.
var AuditActions = []string{
	ActionReplay, ActionEditReplay, ActionDiscard, ActionRestore, ActionBulkStart, ActionBulkFinish,
	ActionBulkCancel, ActionCanaryRelease, ActionPurge, ActionRevealArgs, ActionSignIn, ActionSignInFailed,
	ActionUserChange, ActionTokenChange, ActionJobRunNow, ActionJobKill, ActionJobCancel,
	ActionCanaryVerdict, ActionBulkAutoPause, ActionBulkResume, ActionBulkStopFollowing,
	ActionPause, ActionResume, ActionPauseExpired, ActionGroupMerge, ActionGroupSplit, ActionGroupUnmerge, ActionGroupsRebuild,
}

// SessionActions are the entries of people signing in (or failing to):
// many, routine, and in the way when reading what was done to letters and
// jobs. AuditFilter.HideSessions leaves them out, and with them a user's
// own "sign out everywhere" (a user_change of op signout on oneself); an
// admin ending someone else's sessions stays.
var SessionActions = []string{ActionSignIn, ActionSignInFailed}

// Page sizes of the audit list.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 500
)

// AuditFilter narrows the audit trail. Every field has a query-string form
// (ParseAuditFilter, Values); zero values do not filter.
type AuditFilter struct {
	Actor  string
	Action string
	// DeadLetterID matches entries about one letter: those naming it, and
	// bulk entries that link it in audit_event_letters.
	DeadLetterID int64
	Since        TimeBound
	Until        TimeBound
	Limit        int
	// Before continues the list with entries whose id is smaller; 0 is the
	// newest page.
	Before int64
	// HideSessions leaves out sign-ins and other session entries
	// (SessionActions).
	HideSessions bool
}

// ParseAuditFilter reads an audit filter from a query string; relative
// times resolve against now. Problems come back as a *ValidationError.
func ParseAuditFilter(v url.Values, now time.Time) (AuditFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	problems := map[string]string{}
	f := AuditFilter{Actor: get("actor"), Action: get("action"), Limit: DefaultAuditLimit}
	if len(f.Actor) > 200 || !printable(f.Actor) {
		problems["actor"] = "must be at most 200 printable characters"
	}
	if f.Action != "" && !slices.Contains(AuditActions, f.Action) {
		problems["action"] = "must be one of " + strings.Join(AuditActions, ", ")
	}
	positive := func(k string) int64 {
		s := get(k)
		if s == "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			problems[k] = "must be a positive whole number"
			return 0
		}
		return n
	}
	f.DeadLetterID = positive("dead_letter_id")
	f.Before = positive("cursor")
	f.Since, f.Until = parseTimeRange(get("since"), get("until"), now, problems)
	switch get("hide_sign_ins") {
	case "", "0":
	case "1":
		f.HideSessions = true
	default:
		problems["hide_sign_ins"] = "must be 1 (hide sign-ins) or 0"
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxAuditLimit {
			problems["limit"] = fmt.Sprintf("must be a whole number from 1 to %d", MaxAuditLimit)
		} else {
			f.Limit = n
		}
	}
	if len(problems) > 0 {
		return f, &ValidationError{Fields: problems}
	}
	return f, nil
}

// Values encodes f as a query string that ParseAuditFilter reads back;
// the default limit is left out.
func (f AuditFilter) Values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("actor", f.Actor)
	set("action", f.Action)
	if f.DeadLetterID > 0 {
		v.Set("dead_letter_id", strconv.FormatInt(f.DeadLetterID, 10))
	}
	set("since", f.Since.Raw)
	set("until", f.Until.Raw)
	if f.HideSessions {
		v.Set("hide_sign_ins", "1")
	}
	if f.Limit != DefaultAuditLimit && f.Limit != 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before > 0 {
		v.Set("cursor", strconv.FormatInt(f.Before, 10))
	}
	return v
}

// Narrowed reports whether f filters by anything.
func (f AuditFilter) Narrowed() bool {
	return f.Actor != "" || f.Action != "" || f.DeadLetterID > 0 || !f.Since.IsZero() || !f.Until.IsZero() || f.HideSessions
}

// where renders f as a WHERE clause (empty when f filters nothing) with
// $n placeholders. A letter's entries are the union of two index lookups
// — entries naming it, entries linking it — which stays a handful of rows
// where an OR across the two tables would scan the trail.
func (f AuditFilter) where() (string, []any) {
	var clauses []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.Actor != "" {
		clauses = append(clauses, "actor = "+arg(f.Actor))
	}
	if f.Action != "" {
		clauses = append(clauses, "action = "+arg(f.Action))
	}
	if f.DeadLetterID > 0 {
		n := arg(f.DeadLetterID)
		clauses = append(clauses, "id IN (SELECT id FROM audit_events WHERE dead_letter_id = "+n+
			" UNION SELECT audit_event_id FROM audit_event_letters WHERE dead_letter_id = "+n+")")
	}
	if !f.Since.IsZero() {
		clauses = append(clauses, "at >= "+arg(f.Since.At))
	}
	if !f.Until.IsZero() {
		clauses = append(clauses, "at < "+arg(f.Until.At))
	}
	if f.HideSessions {
		clauses = append(clauses, "NOT (action = ANY("+arg(pq.Array(SessionActions))+") OR (action = "+arg(ActionUserChange)+
			" AND details->>'op' = 'signout' AND lower(details->>'user') = lower(actor)))")
	}
	if f.Before > 0 {
		clauses = append(clauses, "id < "+arg(f.Before))
	}
	if len(clauses) == 0 {
		return "", nil
	}
	return "WHERE " + strings.Join(clauses, " AND "), args
}

// AuditPage is one page of the audit trail.
type AuditPage struct {
	Entries []AuditEntry
	// Next continues after the last entry (pass it as Before); 0 on the
	// last page.
	Next int64
}

// ListAudit returns the page of entries f selects, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) (AuditPage, error) {
	limit := f.Limit
	if limit < 1 || limit > MaxAuditLimit {
		limit = DefaultAuditLimit
	}
	page, err := s.auditPage(ctx, f, limit)
	if err != nil {
		return AuditPage{}, fmt.Errorf("list audit: %w", err)
	}
	return page, nil
}

// auditPage reads limit+1 entries: the extra one only says whether a next
// page exists.
func (s *Store) auditPage(ctx context.Context, f AuditFilter, limit int) (AuditPage, error) {
	where, args := f.where()
	args = append(args, limit+1)
	q := `SELECT ` + auditColumns + ` FROM audit_events ` + where + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	var entries []AuditEntry
	if err := s.db.SelectContext(ctx, &entries, q, args...); err != nil {
		return AuditPage{}, translate(err)
	}
	page := AuditPage{Entries: entries}
	if len(entries) > limit {
		page.Entries = entries[:limit]
		page.Next = page.Entries[limit-1].ID
	}
	return page, nil
}

// auditExportBatch is how many entries one export round trip reads.
const auditExportBatch = 1000

// EachAuditEntry calls fn for every entry f selects (its limit and cursor
// aside), newest first, in keyset batches: an export of the whole trail
// streams in constant memory. Entries appended during the export have
// larger ids than its first batch and are not in it.
func (s *Store) EachAuditEntry(ctx context.Context, f AuditFilter, fn func(AuditEntry) error) error {
	f.Before = 0
	for {
		page, err := s.auditPage(ctx, f, auditExportBatch)
		if err != nil {
			return fmt.Errorf("export audit: %w", err)
		}
		for _, e := range page.Entries {
			if err := fn(e); err != nil {
				return err
			}
		}
		if page.Next == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("export audit: %w", err)
		}
		f.Before = page.Next
	}
}

// GetAuditEntry returns one entry, or ErrNotFound.
func (s *Store) GetAuditEntry(ctx context.Context, id int64) (AuditEntry, error) {
	var e AuditEntry
	if err := s.db.GetContext(ctx, &e, `SELECT `+auditColumns+` FROM audit_events WHERE id = $1`, id); err != nil {
		return AuditEntry{}, fmt.Errorf("audit entry %d: %w", id, translate(err))
	}
	return e, nil
}

// AuditLetter is one letter an entry touched, with what happened to it and
// where the letter is now (Task and Status are empty when it was purged).
type AuditLetter struct {
	DeadLetterID int64  `db:"dead_letter_id" json:"dead_letter_id"`
	Outcome      string `db:"outcome" json:"outcome"`
	Task         string `db:"task" json:"task,omitempty"`
	Status       Status `db:"status" json:"status,omitempty"`
}

// auditLettersSQL lists an entry's letters in id order after a cursor: the
// links a bulk entry wrote, and the one letter a single action names.
const auditLettersSQL = `
SELECT l.dead_letter_id, l.outcome, coalesce(d.task, '') AS task, coalesce(d.status, '') AS status
FROM (
	SELECT dead_letter_id, outcome FROM audit_event_letters WHERE audit_event_id = $1 AND dead_letter_id > $2
	UNION
	SELECT dead_letter_id, action FROM audit_events WHERE id = $1 AND dead_letter_id > $2
) l
LEFT JOIN dead_letters d ON d.id = l.dead_letter_id
ORDER BY l.dead_letter_id LIMIT $3`

// AuditLetters returns up to limit letters entry id touched with an id
// greater than after, in id order, and how many it touched in all.
func (s *Store) AuditLetters(ctx context.Context, id, after int64, limit int) ([]AuditLetter, int64, error) {
	var out []AuditLetter
	if err := s.db.SelectContext(ctx, &out, auditLettersSQL, id, after, limit); err != nil {
		return nil, 0, fmt.Errorf("audit entry %d letters: %w", id, translate(err))
	}
	var total int64
	err := s.db.GetContext(ctx, &total, `SELECT count(*) FROM (
		SELECT dead_letter_id FROM audit_event_letters WHERE audit_event_id = $1
		UNION SELECT dead_letter_id FROM audit_events WHERE id = $1 AND dead_letter_id IS NOT NULL) l`, id)
	if err != nil {
		return nil, 0, fmt.Errorf("audit entry %d letters: count: %w", id, translate(err))
	}
	return out, total, nil
}

// SkipCounts says why an operation skipped the letters it did not act on.
type SkipCounts struct {
	Replayed  int64 // already replayed (by someone else, or before)
	Discarded int64 // discarded
	NotFound  int64 // ids that name no letter (purged, or never existed)
}

// OperationSkips breaks down the skipped letters of an operation over
// explicit ids (at most MaxBatch, so this is one short query): those the
// operation did not act on, by their state now. An operation over a filter
// selected pending letters only, so every skip there is a letter someone
// else replayed or discarded meanwhile, and it returns the zero value.
func (s *Store) OperationSkips(ctx context.Context, op Operation) (SkipCounts, error) {
	if op.Filter != nil || len(op.IDs) == 0 || op.AuditEventID == nil {
		return SkipCounts{}, nil
	}
	var c SkipCounts
	err := s.db.QueryRowxContext(ctx, `
		SELECT count(*) FILTER (WHERE d.replayed_at IS NOT NULL), count(*) FILTER (WHERE d.discarded_at IS NOT NULL)
		FROM dead_letters d
		WHERE d.id = ANY($1) AND d.id <= $2
			AND NOT EXISTS (SELECT 1 FROM audit_event_letters l WHERE l.audit_event_id = $3 AND l.dead_letter_id = d.id)`,
		pq.Array(uniqueIDs(op.IDs)), op.MaxID, *op.AuditEventID).Scan(&c.Replayed, &c.Discarded)
	if err != nil {
		return SkipCounts{}, fmt.Errorf("operation %d skips: %w", op.ID, translate(err))
	}
	// Matched counted the ids that named a letter when the operation began.
	c.NotFound = max(0, int64(len(uniqueIDs(op.IDs)))-op.Matched)
	return c, nil
}

func uniqueIDs(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
