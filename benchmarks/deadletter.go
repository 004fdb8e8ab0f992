package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// deadLetter measures dead-lettering: one worker process with the
// dead-letter profile works a copy of the queue of DeadLetterJobs jobs
// that each fail permanently on their only attempt; then the letters are
// checked against what really happened.
func (s *suite) deadLetter(ctx context.Context, e engine, round int) error {
	var misjudged int64
	out, err := s.work(ctx, e, s.templates[e.Name()].fail, deadLetterProfile(), 1, "", func(ctx context.Context, db *pgxpool.Pool) error {
		var err error
		misjudged, err = e.Misjudged(ctx, db, s.sizes.DeadLetterJobs)
		return err
	})
	if err != nil {
		s.failRecord(e, "deadletter.rate", "deadletter.misjudged", "deadletter.cpu", "deadletter.dbms")
		return err
	}
	n := float64(s.sizes.DeadLetterJobs)
	s.record("deadletter.rate", e, round, perSecond(s.sizes.DeadLetterJobs, out.took))
	s.record("deadletter.misjudged", e, round, float64(misjudged))
	// What a letter costs: the worker's CPU (Redrive's includes grouping
	// the letter's error) and the database's time, each per letter.
	s.record("deadletter.cpu", e, round, float64(out.cpu.Microseconds())/n)
	s.record("deadletter.dbms", e, round, out.cost.ExecMS/n)
	return nil
}
