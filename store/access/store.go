// Package access is the store's room for who may sign in: users, sessions,
// API tokens and the sign-in throttle.
package access

import (
	"sync/atomic"

	"github.com/jmoiron/sqlx"
)

// Store reads and writes this room's tables.
type Store struct {
	db *sqlx.DB
	// changes counts the changes to users and tokens this Store has
	// committed (Changes).
	changes atomic.Uint64
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// Changes counts the changes to users and tokens made through this Store
// (a role, a disabled user, a revoked token, ...), each counted once it is
// committed or has failed. The console remembers who a token is for a
// moment (web/auth) only while this count stays the same, so that what an
// admin changes in this console takes effect at its next request; a change
// made elsewhere (the CLI, another console) waits out that moment.
func (s *Store) Changes() uint64 { return s.changes.Load() }

// changed counts a change to users or tokens; it runs after the change's
// transaction has ended, so a count read before a lookup never outlives a
// change the lookup missed.
func (s *Store) changed() { s.changes.Add(1) }
