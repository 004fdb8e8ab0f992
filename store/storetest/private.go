package storetest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/localpg"
	"github.com/redrive/redrive/store/postgres"
)

// Private is a Postgres server of one test's own, with one migrated
// database, for tests that stop and restart the database under running
// clients: the shared server of NewDB must never go down.
type Private struct {
	*localpg.Cluster
	// DB is the migrated database "redrive" on it.
	DB *DB
}

// NewPrivate starts a private cluster in a temporary folder, creates and
// migrates a database on it, and stops the cluster when t ends. It always
// starts its own cluster, even when DATABASE_URL is set.
func NewPrivate(t testing.TB) *Private {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not t.TempDir: its parent is private to root, and postgres runs as
	// another user when the tests run as root.
	dir, err := os.MkdirTemp("", "redrive-private-pg-")
	if err != nil {
		t.Fatal(err)
	}
	// Durable: with synchronous_commit off, an immediate shutdown loses
	// commits the clients were told had succeeded, as no real deployment
	// does, and a test of restarts would blame the code for it.
	c, err := localpg.Start(ctx, localpg.Config{Dir: dir, Durable: true})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("private cluster: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Stop()
		os.RemoveAll(dir)
	})
	admin, err := postgres.Open(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.ExecContext(ctx, `CREATE DATABASE redrive`)
	admin.Close()
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	dsn := c.DSN("redrive")
	db, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := postgres.Migrate(ctx, db, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return &Private{Cluster: c, DB: &DB{DB: db, DSN: dsn}}
}
