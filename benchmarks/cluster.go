package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/internal/localpg"
)

// cluster is the benchmark's private PostgreSQL server: started from the
// installed binaries by localpg, durable (fsync on), with the fixed
// settings of clusterSettings and pg_stat_statements loaded. Every
// database a run uses is cloned from a template on it and dropped after.
type cluster struct {
	pg    *localpg.Cluster
	dir   string
	admin *pgxpool.Pool
	seq   atomic.Int64
}

// startCluster initialises a cluster in a new temporary folder, applies
// the fixed settings with ALTER SYSTEM, and restarts it so that those
// needing a restart (shared_preload_libraries) take effect.
func startCluster(ctx context.Context) (*cluster, error) {
	dir, err := os.MkdirTemp("", "redrive-bench-pg-")
	if err != nil {
		return nil, fmt.Errorf("cluster folder: %w", err)
	}
	c := &cluster{dir: dir}
	if err := c.configure(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *cluster) configure(ctx context.Context) error {
	pg, err := localpg.Start(ctx, localpg.Config{Dir: c.dir, Durable: true})
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	c.pg = pg
	conn, err := pgx.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	for _, kv := range clusterSettings() {
		// ALTER SYSTEM takes no parameters: the values are our own constants.
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET %s = '%s'", kv[0], kv[1])); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("set %s: %w", kv[0], err)
		}
	}
	conn.Close(ctx)
	if err := pg.Stop(); err != nil {
		return fmt.Errorf("restart cluster: %w", err)
	}
	c.pg = nil
	if c.pg, err = localpg.Start(ctx, localpg.Config{Dir: c.dir, Durable: true}); err != nil {
		return fmt.Errorf("restart cluster: %w", err)
	}
	if c.admin, err = pgxpool.New(ctx, c.pg.DSN("postgres")); err != nil {
		return fmt.Errorf("connect to cluster: %w", err)
	}
	if _, err := c.admin.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	// The harness watches runs (is the queue drained yet?) as a role of its
	// own, so that its queries are not counted in an engine's cost.
	if _, err := c.admin.Exec(ctx, `CREATE ROLE `+observerRole+` LOGIN; GRANT pg_read_all_data TO `+observerRole); err != nil {
		return fmt.Errorf("observer role: %w", err)
	}
	return nil
}

// observerRole is the role the harness's own queries run as.
const observerRole = "bench_observer"

// observe opens a pool on database name as the observer role.
func (c *cluster) observe(ctx context.Context, name string) (*pgxpool.Pool, error) {
	dsn := strings.Replace(c.dsn(name), "://postgres@", "://"+observerRole+"@", 1)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("observe %s: %w", name, err)
	}
	return pool, nil
}

// stop shuts the server down and removes its folder. It is safe to call
// on a cluster that did not fully start.
func (c *cluster) stop() {
	if c.admin != nil {
		c.admin.Close()
	}
	if c.pg != nil {
		_ = c.pg.Stop()
	}
	_ = os.RemoveAll(c.dir)
}

// dsn connects to database name.
func (c *cluster) dsn(name string) string { return c.pg.DSN(name) }

// settings reads back what the server runs with, for the table's header.
func (c *cluster) settings(ctx context.Context) ([][2]string, error) {
	var out [][2]string
	for _, name := range shownSettings() {
		var v string
		if err := c.admin.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			return nil, fmt.Errorf("read setting %s: %w", name, err)
		}
		out = append(out, [2]string{name, v})
	}
	return out, nil
}

// createDB makes an empty database, or a copy of template when it is set.
// CREATE DATABASE ... TEMPLATE copies the files: a run starts from exactly
// the same rows as every other run, at a fraction of the cost of
// inserting them again.
func (c *cluster) createDB(ctx context.Context, prefix, template string) (string, error) {
	name := fmt.Sprintf("%s_%d", prefix, c.seq.Add(1))
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		q += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := c.admin.Exec(ctx, q); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// dropDB removes a database, disconnecting whoever is still connected.
func (c *cluster) dropDB(ctx context.Context, name string) error {
	if _, err := c.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// quiesce prepares the server for a measured run: it waits (up to
// quiesceWait) for autovacuum workers busy with what earlier steps wrote,
// so that the run does not share the two cores with them, then takes a
// checkpoint, so the run does not pay for a previous run's dirty pages and
// every run starts with the same full-page-write state. Autovacuum that
// the run's own writes set off is the run's cost and is not waited for.
func (c *cluster) quiesce(ctx context.Context) error {
	wait, cancel := context.WithTimeout(ctx, quiesceWait)
	defer cancel()
	for wait.Err() == nil { // past quiesceWait, a vacuum still running runs beside the run
		var busy int
		err := c.admin.QueryRow(wait, `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'autovacuum worker'`).Scan(&busy)
		if err != nil && wait.Err() == nil {
			return fmt.Errorf("autovacuum workers: %w", err)
		}
		if busy == 0 {
			break
		}
		select {
		case <-wait.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if _, err := c.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// quiesceWait bounds how long quiesce waits for autovacuum.
const quiesceWait = 3 * time.Minute

// withDB runs fn on a fresh copy of template and drops the copy after,
// whatever fn returned.
func (c *cluster) withDB(ctx context.Context, prefix, template string, fn func(name string) error) error {
	name, err := c.createDB(ctx, prefix, template)
	if err != nil {
		return err
	}
	// Dropped even when ctx was cancelled (Ctrl-C): the cluster is thrown
	// away anyway, but a long suite must not fill the disk run by run.
	defer func() { _ = c.dropDB(context.WithoutCancel(ctx), name) }()
	return fn(name)
}

// errNotDone is returned by a run whose work did not finish in time.
var errNotDone = errors.New("did not finish before the run's timeout")

// vacuum runs VACUUM ANALYZE over a whole database.
func (c *cluster) vacuum(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, c.dsn(name))
	if err != nil {
		return fmt.Errorf("vacuum %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("vacuum %s: %w", name, err)
	}
	return nil
}
