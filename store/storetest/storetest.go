// Package storetest gives each test its own real Postgres database, cloned
// from a migrated template so a fresh schema costs milliseconds.
//
// When DATABASE_URL is set it names a server (and a user allowed to create
// databases) to use; otherwise the first test to ask starts a private
// throwaway cluster with localpg. A test package wires it up in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }
package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/internal/localpg"
	"github.com/redrive/redrive/store/postgres"
)

// server is the one Postgres server of this test binary. It is package
// state because a test binary has exactly one TestMain to own it; it is set
// once, behind setupOnce, and torn down by Main.
var (
	setupOnce sync.Once
	srv       *server
	setupErr  error
	counter   atomic.Int64
	// CREATE DATABASE ... TEMPLATE fails when another session is connected to
	// the template, including another clone in progress: serialise clones.
	cloneMu sync.Mutex
)

type server struct {
	cluster  *localpg.Cluster // nil when DATABASE_URL names the server
	dir      string           // the throwaway cluster's folder
	adminDSN string           // connects to the maintenance database
	dsnFor   func(name string) string
	template string
	admin    *sqlx.DB
	created  []string
	mu       sync.Mutex
}

// Main runs the tests and then stops the throwaway cluster, if one was
// started, or drops the databases the tests made on a shared server.
func Main(m *testing.M) int {
	code := m.Run()
	if srv != nil {
		srv.teardown()
	}
	return code
}

// DB is one test's private database.
type DB struct {
	*sqlx.DB
	// DSN connects to this database; a subprocess under test can use it.
	DSN string
}

// NewDB returns a fresh, migrated database for t, closed and dropped when t ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	setupOnce.Do(func() { srv, setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("test database server: %v", setupErr)
	}
	name := fmt.Sprintf("%s_%d", srv.template, counter.Add(1))
	cloneMu.Lock()
	_, err := srv.admin.Exec(`CREATE DATABASE ` + name + ` TEMPLATE ` + srv.template)
	cloneMu.Unlock()
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	srv.mu.Lock()
	srv.created = append(srv.created, name)
	srv.mu.Unlock()
	dsn := srv.dsnFor(name)
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return &DB{DB: db, DSN: dsn}
}

func setup() (*server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := &server{template: fmt.Sprintf("redrive_tmpl_%d", os.Getpid())}
	if dsn := os.Getenv("DATABASE_URL"); dsn != "" {
		s.adminDSN = dsn
		s.dsnFor = func(name string) string { return withDatabase(dsn, name) }
	} else {
		dir, err := os.MkdirTemp("", "redrive-test-pg-")
		if err != nil {
			return nil, err
		}
		c, err := localpg.Start(ctx, localpg.Config{Dir: dir})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.cluster, s.dir = c, dir
		s.adminDSN = c.DSN("postgres")
		s.dsnFor = c.DSN
	}
	admin, err := postgres.Open(ctx, s.adminDSN)
	if err != nil {
		s.teardown()
		return nil, err
	}
	s.admin = admin
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+s.template); err != nil {
		s.teardown()
		return nil, fmt.Errorf("create template database: %w", err)
	}
	tmpl, err := postgres.Open(ctx, s.dsnFor(s.template))
	if err != nil {
		s.teardown()
		return nil, err
	}
	_, err = postgres.Migrate(ctx, tmpl, slog.New(slog.DiscardHandler))
	tmpl.Close()
	if err != nil {
		s.teardown()
		return nil, fmt.Errorf("migrate template: %w", err)
	}
	return s, nil
}

func (s *server) teardown() {
	if s.cluster != nil {
		if s.admin != nil {
			s.admin.Close()
		}
		_ = s.cluster.Stop()
		os.RemoveAll(s.dir)
		os.RemoveAll(s.cluster.Dir()) // the same folder, unless it had to move
		return
	}
	if s.admin == nil {
		return
	}
	for _, name := range append(s.created, s.template) {
		_, _ = s.admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`)
	}
	s.admin.Close()
}

// withDatabase swaps the database name in a URL-style DSN.
func withDatabase(dsn, name string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		// key=value form
		return strings.TrimSpace(dsn) + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}
