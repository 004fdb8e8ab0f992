// Package queue is the store's room for the job queue: enqueueing, claiming
// and acknowledging jobs, dead-lettering the ones that fail for good,
// rescuing expired leases, cleaning finished jobs, pauses, the workers'
// heartbeats and the job list.
//
// # Job states
//
//	available ──claim──▶ running ──success──────────────────────────▶ succeeded
//	    ▲                 │   │
//	    │                 │   └─permanent error, or failure on the last attempt──▶ dead
//	    │                 ▼
//	    └──run_at due── retrying  (transient failure, expired lease, shutdown hand-back)
//
// A job that reaches dead gets exactly one row in dead_letters, written in the
// same transaction as the job's final state, so a job is never half dead.
//
// # Delivery contract
//
// Delivery is at-least-once. A job is acknowledged only after its handler
// returns, so a worker that dies mid-job leaves the job running under a lease
// that expires; the lease rescuer then hands it back (or dead-letters it with
// reason lease_expired once its attempts are spent). Attempts are counted at
// claim time, which is what bounds a job that keeps killing its worker.
// Handlers therefore must tolerate running twice: see worker.ProcessOnce.
//
// Every write the worker makes to a claimed job is guarded by its lease
// (WHERE lease_owner = $worker AND state = 'running'), so a worker that lost
// its lease can never overwrite the outcome recorded by the one that won it.
package queue

import (
	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/store/groups"
)

// Store reads and writes jobs.
type Store struct {
	db *sqlx.DB
	// groups names the error group of each letter the queue writes.
	groups *groups.Store
}

// New returns the queue on a handle from postgres.Open; groups assigns
// the letters it dead-letters to their error groups.
func New(db *sqlx.DB, groups *groups.Store) *Store { return &Store{db: db, groups: groups} }

// DB returns the handle the queue runs on, for callers that need their own
// transaction (Enqueue inside a producer's transaction, ProcessOnce).
func (s *Store) DB() *sqlx.DB { return s.db }
