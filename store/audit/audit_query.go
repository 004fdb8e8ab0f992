package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// auditWhere renders f as a WHERE clause (empty when f filters nothing) with
// $n placeholders. A letter's entries are the union of two index lookups
// — entries naming it, entries linking it — which stays a handful of rows
// where an OR across the two tables would scan the trail.
func auditWhere(f dlq.AuditFilter) (string, []any) {
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
		clauses = append(clauses, "NOT (action = ANY("+arg(pq.Array(dlq.SessionActions))+") OR (action = "+arg(dlq.ActionUserChange)+
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

// ListAudit returns the page of entries f selects, newest first.
func (s *Store) ListAudit(ctx context.Context, f dlq.AuditFilter) (dlq.AuditPage, error) {
	limit := f.Limit
	if limit < 1 || limit > dlq.MaxAuditLimit {
		limit = dlq.DefaultAuditLimit
	}
	page, err := s.auditPage(ctx, f, limit)
	if err != nil {
		return dlq.AuditPage{}, fmt.Errorf("list audit: %w", err)
	}
	return page, nil
}

// auditPage reads limit+1 entries: the extra one only says whether a next
// page exists.
func (s *Store) auditPage(ctx context.Context, f dlq.AuditFilter, limit int) (dlq.AuditPage, error) {
	where, args := auditWhere(f)
	args = append(args, limit+1)
	q := `SELECT ` + auditColumns + ` FROM audit_events ` + where + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	if f.DeadLetterID > 0 && len(args) == 2 {
		// A letter's own entries, which its page reads on every view: two
		// lookups by the letter's id whatever the letter, so one plan
		// serves them all.
		args = append([]any{postgres.Prepared}, args...)
	}
	var entries []dlq.AuditEntry
	if err := s.db.SelectContext(ctx, &entries, q, args...); err != nil {
		return dlq.AuditPage{}, postgres.Translate(err)
	}
	page := dlq.AuditPage{Entries: entries}
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
func (s *Store) EachAuditEntry(ctx context.Context, f dlq.AuditFilter, fn func(dlq.AuditEntry) error) error {
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
func (s *Store) GetAuditEntry(ctx context.Context, id int64) (dlq.AuditEntry, error) {
	var e dlq.AuditEntry
	if err := s.db.GetContext(ctx, &e, `SELECT `+auditColumns+` FROM audit_events WHERE id = $1`, id); err != nil {
		return dlq.AuditEntry{}, fmt.Errorf("audit entry %d: %w", id, postgres.Translate(err))
	}
	return e, nil
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
func (s *Store) AuditLetters(ctx context.Context, id, after int64, limit int) ([]dlq.AuditLetter, int64, error) {
	var out []dlq.AuditLetter
	if err := s.db.SelectContext(ctx, &out, auditLettersSQL, id, after, limit); err != nil {
		return nil, 0, fmt.Errorf("audit entry %d letters: %w", id, postgres.Translate(err))
	}
	var total int64
	err := s.db.GetContext(ctx, &total, `SELECT count(*) FROM (
		SELECT dead_letter_id FROM audit_event_letters WHERE audit_event_id = $1
		UNION SELECT dead_letter_id FROM audit_events WHERE id = $1 AND dead_letter_id IS NOT NULL) l`, id)
	if err != nil {
		return nil, 0, fmt.Errorf("audit entry %d letters: count: %w", id, postgres.Translate(err))
	}
	return out, total, nil
}
