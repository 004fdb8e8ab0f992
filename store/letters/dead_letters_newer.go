package letters

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// CountNewer counts the letters f matches whose id is above afterID (the
// newest the open page shows), up to NewerCap: a light query the list
// polls so that it can say it has gone stale, one bounded range of the
// primary key plus f's conditions.
func (s *Store) CountNewer(ctx context.Context, f dlq.Filter, afterID int64) (int64, error) {
	f, err := s.probe.Filter(ctx, s.db, f)
	if err != nil {
		return 0, fmt.Errorf("count newer letters: %w", err)
	}
	src := FilterSource(f)
	where, args := SelectionWhere(dlq.Selection{Filter: &f}, src, 0)
	args = append(args, afterID)
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %s WHERE %s AND id > $%d LIMIT %d) n`,
		src.Table(), where, len(args), dlq.NewerCap)
	var n int64
	if err := s.db.GetContext(ctx, &n, q, args...); err != nil {
		return 0, fmt.Errorf("count newer letters: %w", postgres.Translate(err))
	}
	return n, nil
}
