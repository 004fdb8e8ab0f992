package localpg_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/localpg"
)

func TestStartRefusesAPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, err = localpg.Start(context.Background(), localpg.Config{Dir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("want a port-in-use error, got %v", err)
	}
}

func TestStartAndStop(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: as root, postgres runs as another user, who must be
	// able to reach the folder; MkdirTemp makes one level under /tmp.
	dir, err := os.MkdirTemp("", "localpg-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := localpg.Start(context.Background(), localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// The folder itself is private (MkdirTemp makes it 0700), but it is
	// chowned to postgres: no need to move.
	if c.Dir() != dir || c.Moved() != "" {
		t.Errorf("cluster moved from %s to %s: %s", dir, c.Dir(), c.Moved())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// The data folder is reused: a second start finds the cluster initialised.
	c, err = localpg.Start(context.Background(), localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

// As root, postgres runs as the postgres user, who cannot enter a private
// folder such as root's home on Debian (mode 0700): the cluster must start
// anyway, from a folder of its own, and find its data there again.
func TestStartBelowAPrivateFolder(t *testing.T) {
	t.Parallel()
	private, err := os.MkdirTemp("", "localpg-home-") // mode 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	shared, err := os.MkdirTemp("", "localpg-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := localpg.Config{Dir: filepath.Join(private, "re drive", ".redrive", "postgres"), SharedRoot: shared}

	c, err := localpg.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if !strings.HasPrefix(c.Dir(), shared+"/") || !strings.Contains(c.Moved(), "cannot reach") {
			t.Errorf("as root the cluster must move under %s and say why; it is in %s (%q)", shared, c.Dir(), c.Moved())
		}
	} else if c.Dir() != cfg.Dir || c.Moved() != "" {
		t.Errorf("not root: the cluster must stay in %s, is in %s (%q)", cfg.Dir, c.Dir(), c.Moved())
	}
	db, err := sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE DATABASE kept`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	first := c.Dir()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	// The second start finds the same folder and the data in it.
	c, err = localpg.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if c.Dir() != first {
		t.Errorf("second start in %s, first in %s", c.Dir(), first)
	}
	db, err = sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var kept bool
	if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'kept')`).Scan(&kept); err != nil || !kept {
		t.Fatalf("the data of the first start is gone: %v %v", kept, err)
	}
}
