package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// statementsEnv, when set, makes each metered run print its costliest
// statements to standard error: where a run's database time went.
const statementsEnv = "BENCH_STATEMENTS"

// dbCost is what one database's statements cost the server, summed over
// pg_stat_statements: execution time and the WAL they wrote (full-page
// images included). Autovacuum and the checkpointer are not statements and
// do not count; a run starts after a CHECKPOINT so that the share of
// full-page images is the same for every run.
type dbCost struct {
	Calls    int64
	ExecMS   float64
	WALBytes int64
}

const dbCostSQL = `
SELECT coalesce(sum(s.calls), 0)::bigint, coalesce(sum(s.total_exec_time), 0)::float8, coalesce(sum(s.wal_bytes), 0)::bigint
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = $1 AND s.userid = 'postgres'::regrole`

// cost reads the running totals of database name.
func (c *cluster) cost(ctx context.Context, name string) (dbCost, error) {
	var out dbCost
	if err := c.admin.QueryRow(ctx, dbCostSQL, name).Scan(&out.Calls, &out.ExecMS, &out.WALBytes); err != nil {
		return dbCost{}, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return out, nil
}

// sub is the cost between two readings.
func (a dbCost) sub(b dbCost) dbCost {
	return dbCost{Calls: a.Calls - b.Calls, ExecMS: a.ExecMS - b.ExecMS, WALBytes: a.WALBytes - b.WALBytes}
}

// costMeter measures one run's database cost: start before, stop after.
type costMeter struct {
	c      *cluster
	name   string
	before dbCost
}

// meter empties pg_stat_statements first: its table holds a bounded number
// of statements (pg_stat_statements.max, 5,000), and the entries of earlier
// runs' databases must not crowd out this run's.
func (c *cluster) meter(ctx context.Context, name string) (*costMeter, error) {
	if _, err := c.admin.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return nil, fmt.Errorf("reset pg_stat_statements: %w", err)
	}
	before, err := c.cost(ctx, name)
	if err != nil {
		return nil, err
	}
	return &costMeter{c: c, name: name, before: before}, nil
}

// stop returns the cost since the meter started. pg_stat_statements counts
// a statement when it ends, so the workers must have stopped first.
func (m *costMeter) stop(ctx context.Context) (dbCost, error) {
	// A backend that exits flushes its counters as it goes; give the ones
	// of just-stopped workers a moment.
	select {
	case <-ctx.Done():
		return dbCost{}, ctx.Err()
	case <-time.After(200 * time.Millisecond):
	}
	after, err := m.c.cost(ctx, m.name)
	if err != nil {
		return dbCost{}, err
	}
	if os.Getenv(statementsEnv) != "" {
		if err := m.c.writeStatements(ctx, os.Stderr, m.name); err != nil {
			return dbCost{}, err
		}
	}
	return after.sub(m.before), nil
}

const topStatementsSQL = `
SELECT s.calls, s.rows, s.total_exec_time, s.wal_records, s.wal_bytes, s.shared_blks_hit + s.shared_blks_read, s.query
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = $1 AND s.userid = 'postgres'::regrole
ORDER BY s.total_exec_time DESC LIMIT 8`

// writeStatements prints the costliest statements of database name since
// the last reset: calls, rows, total and mean time, WAL and buffers.
func (c *cluster) writeStatements(ctx context.Context, w io.Writer, name string) error {
	rows, err := c.admin.Query(ctx, topStatementsSQL, name)
	if err != nil {
		return fmt.Errorf("read pg_stat_statements: %w", err)
	}
	defer rows.Close()
	fmt.Fprintf(w, "statements of %s:\n", name)
	for rows.Next() {
		var calls, nrows, walRecords, walBytes, blocks int64
		var total float64
		var query string
		if err := rows.Scan(&calls, &nrows, &total, &walRecords, &walBytes, &blocks, &query); err != nil {
			return fmt.Errorf("read pg_stat_statements: %w", err)
		}
		query = strings.Join(strings.Fields(query), " ")
		if len(query) > 110 {
			query = query[:110]
		}
		fmt.Fprintf(w, "  calls=%d rows=%d total=%.0fms mean=%.3fms wal_rec=%d wal_bytes=%d blks=%d  %s\n",
			calls, nrows, total, total/float64(max(calls, 1)), walRecords, walBytes, blocks, query)
	}
	return rows.Err()
}
