// Package letters is the store's room for reading dead letters: the list,
// search, counts and the overview, exports, the mask policy and revealing
// masked arguments.
package letters

import "github.com/jmoiron/sqlx"

// Store reads and writes this room's tables.
type Store struct {
	db *sqlx.DB
	// templates keeps the traceback templates letters' pages read.
	templates tracebackTemplates
	// probe narrows reads by ranges on the arguments.
	probe ArgProbe
}

// WithArgProbe returns the store with probe narrowing its reads (tests
// compare reads with and without it).
// It is a store of its own, its caches empty.
func (s *Store) WithArgProbe(probe ArgProbe) *Store {
	return &Store{db: s.db, probe: probe}
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store { return &Store{db: db} }
