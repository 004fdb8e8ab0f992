package letters

import (
	"context"

	"github.com/redrive/redrive/dlq"
)

// ListPageSQL is the list's statement and its arguments, exported for the
// store's tests that read its plan (EXPLAIN).
func ListPageSQL(f dlq.Filter, limit int) (string, []any) { return listPageSQL(f, limit) }

// EscapeLike escapes a search term for ILIKE as the store does, for the
// test that searches a schema the store no longer reads.
func EscapeLike(s string) string { return escapeLike(s) }

// ProbedListPageSQL is the list's statement and its arguments as listPage
// runs them, after the store's probe (ArgProbe), for the same tests.
func (s *Store) ProbedListPageSQL(ctx context.Context, f dlq.Filter, limit int) (string, []any, error) {
	f, err := s.probe.Filter(ctx, s.db, f)
	if err != nil {
		return "", nil, err
	}
	q, args := listPageSQL(f, limit)
	return q, args, nil
}
