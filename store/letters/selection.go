package letters

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
)

// SelectionWhere returns the selection's condition in a query of src, numbering
// its arguments after the first offset ones. Of pending_dead_letters, the
// letters a bulk action can change, it selects the selection's pending
// letters: a filter for another status then selects none.
func SelectionWhere(s dlq.Selection, src LetterSource, offset int) (string, []any) {
	if s.Filter == nil {
		return fmt.Sprintf("id = ANY($%d)", offset+1), []any{pq.Array(s.IDs)}
	}
	clause, args := FilterWhere(s.Filter.FirstPage(), src, false, offset)
	clause = strings.TrimPrefix(clause, "WHERE ")
	if clause == "" {
		return "TRUE", nil
	}
	return clause, args
}

// PendingSource is where the selection's pending letters are best read
// from to be counted, sampled or acted on (Filter.source). Ids are looked
// up by the pending table's key; a filter for another status has no
// pending letters, which the pending table's condition for it says
// (FALSE).
func PendingSource(s dlq.Selection) LetterSource {
	if s.Filter == nil || (s.Filter.Status != "" && s.Filter.Status != dlq.StatusPending) {
		return PendingLetters
	}
	return FilterSource(*s.PendingOnly().Filter)
}

// BoundedWhere is SelectionWhere's condition, bounded by MaxID when set; its
// arguments are numbered after the first offset ones.
func BoundedWhere(s dlq.Selection, src LetterSource, offset int) (string, []any) {
	where, args := SelectionWhere(s, src, offset)
	if s.MaxID > 0 {
		args = append(args, s.MaxID)
		where += fmt.Sprintf(" AND id <= $%d", offset+len(args))
	}
	return where, args
}

// SampleSQL reads columns of the selection's newest limit pending letters
// (a preview's sample), and returns its arguments.
func SampleSQL(s dlq.Selection, columns string, limit int) (string, []any) {
	pending := s.PendingOnly()
	src := PendingSource(s)
	lim := strconv.Itoa(limit)
	if pending.Filter != nil && WalksGroups(*pending.Filter, src) {
		walks, args := EachGroupSQL(*pending.Filter, nil, NewestFirst, lim, func(g dlq.Filter, args []any) (string, []any) {
			where, more := BoundedWhere(dlq.Selection{Filter: &g, MaxID: s.MaxID}, src, len(args))
			return `SELECT id, failed_at FROM dead_letters WHERE ` + where + ` ORDER BY ` + NewestFirst + ` LIMIT ` + lim, append(args, more...)
		})
		return ByIDNewestFirstSQL(columns, `SELECT id FROM (`+walks+`) found`), args
	}
	where, args := BoundedWhere(pending, src, 0)
	return NewestFirstSQL(columns, src, "WHERE "+where, lim), args
}
