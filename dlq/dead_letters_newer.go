package dlq

import (
	"context"
	"fmt"
)

// NewerCap is where CountNewer stops counting: the list only needs to say
// "N new letters", and "1,000+" says enough.
const NewerCap = 1000

// CountNewer counts the letters f matches whose id is above afterID (the
// newest the open page shows), up to NewerCap: a light query the list
// polls so that it can say it has gone stale, one bounded range of the
// primary key plus f's conditions.
func (s *Store) CountNewer(ctx context.Context, f Filter, afterID int64) (int64, error) {
	src := f.source()
	where, args := Selection{Filter: &f}.where(src, 0)
	args = append(args, afterID)
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %s WHERE %s AND id > $%d LIMIT %d) n`,
		src.table(), where, len(args), NewerCap)
	var n int64
	if err := s.db.GetContext(ctx, &n, q, args...); err != nil {
		return 0, fmt.Errorf("count newer letters: %w", translate(err))
	}
	return n, nil
}
