// Package operations is the store's room for what operators do to letters
// and live jobs: replaying, discarding and restoring one letter, bulk
// operations over a frozen selection (created, run batch by batch or lane
// by lane, followed to their outcome, paused, cancelled), actions on live
// jobs and purging settled letters.
package operations

import (
	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/store/groups"
)

// Store reads and writes operations and the letters and jobs they change.
type Store struct {
	db *sqlx.DB
	// groups names the error group of a job killed into a letter.
	groups *groups.Store
}

// New returns the room's store on a handle from postgres.Open; groups
// assigns the jobs it kills to their error groups.
func New(db *sqlx.DB, groups *groups.Store) *Store { return &Store{db: db, groups: groups} }
