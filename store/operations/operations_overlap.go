package operations

import (
	"context"
	"fmt"
	"strings"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/postgres"
)

// maxOverlapOperations bounds how many open operations one check compares
// against: each adds a condition to the count. More than this many in
// flight at once is not an incident anyone can follow anyway.
const maxOverlapOperations = 20

// SelectionOverlaps counts, for each open operation (not Finished), how many
// of sel's pending letters (up to sel.MaxID when set) fall in that
// operation's selection too: its ids or its pinned filter, up to its own
// bound. Letters it already handled are no longer pending and do not count.
// Operations that overlap nothing are left out; the rest come oldest first.
// It is one count over the selection, like the preview's, with one FILTER
// per open operation.
func (s *Store) SelectionOverlaps(ctx context.Context, sel dlq.Selection) ([]dlq.Overlap, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	var open []dlq.Operation
	if err := s.db.SelectContext(ctx, &open, `SELECT `+operationColumns+` FROM operations
		WHERE finished_at IS NULL ORDER BY id LIMIT $1`, maxOverlapOperations); err != nil {
		return nil, fmt.Errorf("selection overlaps: open operations: %w", postgres.Translate(err))
	}
	sel, err := s.probe.Selection(ctx, s.db, sel)
	if err != nil {
		return nil, fmt.Errorf("selection overlaps: %w", err)
	}
	// Only pending letters can still be acted on: both selections are
	// read from pending_dead_letters.
	where, args := letters.SelectionWhere(sel, letters.PendingLetters, 0)
	cond := []string{"(" + where + ")"}
	if sel.MaxID > 0 {
		args = append(args, sel.MaxID)
		cond = append(cond, fmt.Sprintf("id <= $%d", len(args)))
	}
	var counts, either []string
	var kept []dlq.Operation
	for _, op := range open {
		if op.State.Finished() {
			continue
		}
		opSel, err := op.StoredSelection()
		if err != nil {
			continue // a stored filter no longer readable: the runner fails that operation, it acts on nothing
		}
		if opSel, err = s.probe.Selection(ctx, s.db, opSel); err != nil {
			return nil, fmt.Errorf("selection overlaps: %w", err)
		}
		w, a := letters.SelectionWhere(opSel, letters.PendingLetters, len(args))
		args = append(args, a...)
		args = append(args, op.MaxID)
		c := fmt.Sprintf("(%s AND id <= $%d)", w, len(args))
		counts = append(counts, "count(*) FILTER (WHERE "+c+")")
		either = append(either, c)
		kept = append(kept, op)
	}
	if len(kept) == 0 {
		return nil, nil
	}
	q := `SELECT ` + strings.Join(counts, ", ") + ` FROM pending_dead_letters WHERE ` + strings.Join(cond, " AND ") +
		` AND (` + strings.Join(either, " OR ") + `)`
	n := make([]int64, len(kept))
	dest := make([]any, len(kept))
	for i := range n {
		dest[i] = &n[i]
	}
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("selection overlaps: %w", postgres.Translate(err))
	}
	var out []dlq.Overlap
	for i, op := range kept {
		if n[i] > 0 {
			out = append(out, dlq.Overlap{Operation: op, Letters: n[i]})
		}
	}
	return out, nil
}
