package dlq

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// MergeGroups (tests only) merges the groups from into the group into, audited as the
// actor's: their letters move, their ids redirect, their templates stay
// (error_group_move). It checks nothing and widens no template: the
// console's merge is MergeErrorGroups.
func (s *Store) MergeGroups(ctx context.Context, from []string, into string, actor Actor, reason string) error {
	return s.inTx(ctx, func(tx *sqlx.Tx) error {
		return mergeGroups(ctx, tx, from, into, actor, reason)
	})
}
