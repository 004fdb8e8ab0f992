// Package audit is the store's room for the hash-chained audit trail and the
// idempotency keys of actions: every change an operator makes appends an
// entry here in the change's own transaction.
package audit

import "github.com/jmoiron/sqlx"

// Store reads and writes this room's tables.
type Store struct {
	db *sqlx.DB
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store { return &Store{db: db} }
