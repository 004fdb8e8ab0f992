package groups

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// Group returns the error group with fingerprint, its sample message's
// arguments included for masking (ErrNotFound when there is none).
func (s *Store) Group(ctx context.Context, fingerprint string) (dlq.ErrorGroup, error) {
	var g dlq.ErrorGroup
	q := `SELECT g.*, sample.* FROM (SELECT ` + GroupColumns + ` FROM error_groups WHERE fingerprint = $1) g` + GroupSampleJoin
	if err := s.db.GetContext(ctx, &g, q, fingerprint); err != nil {
		return dlq.ErrorGroup{}, fmt.Errorf("error group %s: %w", fingerprint, postgres.Translate(err))
	}
	return g, nil
}
