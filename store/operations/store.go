// Package operations is the store's room for what operators do to letters
// and live jobs: replaying, discarding and restoring one letter, bulk
// operations over a frozen selection (created, run batch by batch or lane
// by lane, followed to their outcome, paused, cancelled), actions on live
// jobs and purging settled letters.
package operations

import (
	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/groups"
)

// Store reads and writes operations and the letters and jobs they change.
type Store struct {
	db *sqlx.DB
	// groups names the error group of a job killed into a letter.
	groups *groups.Store
	// retriers replay the letters of the sources that run their own jobs
	// (River), by name; see WithRetriers.
	retriers map[string]dlq.Retrier
}

// New returns the room's store on a handle from postgres.Open; groups
// assigns the jobs it kills to their error groups.
func New(db *sqlx.DB, groups *groups.Store) *Store { return &Store{db: db, groups: groups} }

// WithRetriers returns a copy of s that replays the letters of each named
// source through its Retrier (a River source's job, retried in River); the
// letters of a source without one are not replayed. A Retrier that is also
// a dlq.Deleter deletes a letter's job in its source when a discard asks.
func (s *Store) WithRetriers(retriers map[string]dlq.Retrier) *Store {
	c := *s
	c.retriers = retriers
	return &c
}
