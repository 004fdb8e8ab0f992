package web

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/reads"
	"github.com/redrive/redrive/store/access"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/outbox"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/sources"
)

// stores are the rooms of the store on the primary. Routes take the room
// a handler changes; what pages read goes through reads.Masked.
type stores struct {
	db         *sqlx.DB
	queue      *queue.Store
	letters    *letters.Store
	groups     *groups.Store
	operations *operations.Store
	access     *access.Store
	audit      *audit.Store
	outbox     *outbox.Store
	sources    *sources.Store
}

func openStores(db *sqlx.DB) stores {
	g := groups.New(db)
	return stores{db: db, queue: queue.New(db, g), letters: letters.New(db), groups: g,
		operations: operations.New(db, g), access: access.New(db), audit: audit.New(db), outbox: outbox.New(db),
		sources: sources.New(db, g)}
}

// masked returns the masked reads over the stores.
func (s stores) masked(masker mask.Policy) *reads.Masked {
	return reads.New(reads.Stores{Letters: s.letters, Groups: s.groups, Queue: s.queue,
		Operations: s.operations, Audit: s.audit}, masker)
}

// Ready reports nil when the primary answers and no migration is pending
// (handlers.Readier).
func (s stores) Ready(ctx context.Context) error { return postgres.Ready(ctx, s.db) }
