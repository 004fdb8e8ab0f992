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
	"github.com/redrive/redrive/store/letters"
)

// Store reads and writes operations and the letters and jobs they change.
type Store struct {
	db *sqlx.DB
	// groups names the error group of a job killed into a letter.
	groups *groups.Store
	// sources reach the sources whose letters are replayed there (River,
	// an HTTP source's replay endpoint), by name; see WithSources.
	sources map[string]dlq.ReplaySender
	// probe narrows the reads of a selection by ranges on the arguments.
	probe letters.ArgProbe
}

// New returns the room's store on a handle from postgres.Open; groups
// assigns the jobs it kills to their error groups.
func New(db *sqlx.DB, groups *groups.Store) *Store { return &Store{db: db, groups: groups} }

// WithArgProbe returns a copy of s whose reads of a selection probe with
// probe (tests compare them with and without it).
func (s *Store) WithArgProbe(probe letters.ArgProbe) *Store {
	c := *s
	c.probe = probe
	return &c
}

// WithSources returns a copy of s that replays the letters of each named
// source there: a bulk replay's are queued and sent by its ReplaySender
// (SendSourceReplays), and followed when it is also a dlq.ReplayFollower;
// one that is a dlq.Retrier replays a single letter at once, in the
// request, and one that is a dlq.Deleter deletes a letter's job there when
// a discard asks. The letters of a source not named here wait.
func (s *Store) WithSources(sources map[string]dlq.ReplaySender) *Store {
	c := *s
	c.sources = sources
	return &c
}
