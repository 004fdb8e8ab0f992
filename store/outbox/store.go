// Package outbox is the store's room for notifications: the events waiting to
// be delivered to webhooks, their delivery attempts and digests.
package outbox

import "github.com/jmoiron/sqlx"

// Store reads and writes this room's tables.
type Store struct {
	db *sqlx.DB
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store { return &Store{db: db} }
