// Package groups is the store's room for error groups: assigning each new
// letter to its group (the grouper's learned templates live here), the
// groups' pages, their variables and per-minute counts, operators' merges,
// splits and unmerges, rebuilding every group, and incidents (the same
// failure across tasks).
package groups

import (
	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/grouping"
)

// Store reads and writes the error groups and the grouper's templates.
type Store struct {
	db *sqlx.DB
	// grouper assigns new letters to error groups, learning their
	// templates; what it learns is kept in the database (templateStore).
	grouper *grouping.Grouper
}

// New returns the room's store on a handle from postgres.Open.
func New(db *sqlx.DB) *Store {
	s := &Store{db: db}
	s.grouper = grouping.New(templateStore{s})
	return s
}

// Resolve maps group ids to the ids they now mean, following the merges
// the grouper knows of.
func (s *Store) Resolve(ids []string) []string { return s.grouper.Resolve(ids) }
