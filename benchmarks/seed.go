package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// seed times `redrive seed --dead-letters Letters`, then the second step
// that builds the letters' search rows, `redrive search rebuild`, so the
// pages are measured on letters that are all searchable and no indexer
// runs beside them. The seed starts on a quiet server, as every measured
// run does (quiesce); the search rows are built right after it, beside
// whatever autovacuum the seed set off.
func (s *suite) seed(ctx context.Context, dsn string, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	if err := s.c.quiesce(ctx); err != nil {
		return err
	}
	start := time.Now()
	if _, err := s.redrive(ctx, dsn, "", "seed", "--dead-letters", strconv.Itoa(s.sizes.Letters)); err != nil {
		s.failRecord(redriveEngine{}, "seed", "seed.search")
		return err
	}
	s.record("seed", redriveEngine{}, round, time.Since(start).Seconds())
	start = time.Now()
	if _, err := s.redrive(ctx, dsn, "", "search", "rebuild"); err != nil {
		s.failRecord(redriveEngine{}, "seed.search")
		return err
	}
	s.record("seed.search", redriveEngine{}, round, time.Since(start).Seconds())
	return nil
}

// sizeTables are what a million letters cost on disk: the letters, their
// search side tables (the text, and the values ranges are probed in), and
// the summaries the triggers keep. A table a
// schema lacks counts as nothing; dead_letters, a view of the three
// letter tables (00101_letters.sql), counts nothing.
const sizeSQL = `SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0)::bigint FROM unnest(ARRAY[
	'dead_letters', 'dead_letter_records', 'pending_dead_letters', 'dead_letter_outcomes', 'dead_letter_search', 'dead_letter_arg_values', 'dead_letter_counts', 'error_groups',
	'dead_letter_inflow', 'dead_letter_inflow_daily', 'dead_letter_inflow_totals']) t`

func (s *suite) size(ctx context.Context, db *pgxpool.Pool, round int) error {
	var bytes int64
	if err := db.QueryRow(ctx, sizeSQL).Scan(&bytes); err != nil {
		s.failRecord(redriveEngine{}, "size")
		return fmt.Errorf("database size: %w", err)
	}
	perMillion := float64(bytes) * 1e6 / float64(s.sizes.Letters)
	s.record("size", redriveEngine{}, round, perMillion/(1<<20))
	return nil
}
