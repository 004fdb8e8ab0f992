// Package access is the store's room for who may sign in: users, sessions,
// API tokens and the sign-in throttle.
package access

import "github.com/jmoiron/sqlx"

// Store reads and writes this room's tables.
type Store struct {
	db *sqlx.DB
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store { return &Store{db: db} }
