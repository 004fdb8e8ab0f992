package storetest

import (
	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/store/access"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/outbox"
	"github.com/redrive/redrive/store/queue"
	"github.com/redrive/redrive/store/sources"
)

// Stores are every room of the store on one database, for the tests that
// set up through several rooms and check what each one sees. The product
// wires each consumer to its own room.
type Stores struct {
	DB         *sqlx.DB
	Queue      *queue.Store
	Letters    *letters.Store
	Groups     *groups.Store
	Operations *operations.Store
	Access     *access.Store
	Audit      *audit.Store
	Outbox     *outbox.Store
	Sources    *sources.Store
}

// NewStores opens every room on db; the queue and the operations share
// the groups room, as in the console.
func NewStores(db *sqlx.DB) *Stores {
	g := groups.New(db)
	return &Stores{DB: db, Queue: queue.New(db, g), Letters: letters.New(db), Groups: g,
		Operations: operations.New(db, g), Access: access.New(db), Audit: audit.New(db), Outbox: outbox.New(db),
		Sources: sources.New(db, g)}
}
