package groups

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// The queries of a group's page, exported for the store's tests that read
// their plans (EXPLAIN).
const (
	GroupVariableLettersSQL = groupVariableLettersSQL
	GroupMinutelySQL        = groupMinutelySQL
)

// MergeGroupsUnchecked merges the groups from into the group into,
// audited as the actor's: their letters move, their ids redirect, their
// templates stay (error_group_move). It checks nothing and widens no
// template, so that a test can set up a merge the console's checks would
// refuse; the console merges with MergeErrorGroups.
func (s *Store) MergeGroupsUnchecked(ctx context.Context, from []string, into string, actor dlq.Actor, reason string) error {
	return postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		return mergeGroups(ctx, tx, from, into, actor, reason)
	})
}
