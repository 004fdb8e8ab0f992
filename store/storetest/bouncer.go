package storetest

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/localpg"
)

// Bouncer starts a private PgBouncer in front of db's server in mode
// ("transaction", "session"), stopped when t ends, and returns it and a DSN
// to db through it. It skips t when pgbouncer is not installed: `make test`
// installs it.
func Bouncer(t testing.TB, db *DB, mode string) (*localpg.Bouncer, string) {
	t.Helper()
	if _, err := localpg.FindBouncer(); err != nil {
		t.Skipf("%v", err)
	}
	u, err := url.Parse(db.DSN)
	if err != nil || u.Scheme == "" {
		t.Fatalf("test DSN %q is not a URL", db.DSN)
	}
	name := strings.TrimPrefix(u.Path, "/")
	// Not t.TempDir: as root, PgBouncer runs as postgres, who must be able
	// to reach the folder.
	dir, err := os.MkdirTemp("", "redrive-test-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	b, err := localpg.StartBouncer(context.Background(), localpg.BouncerConfig{Dir: dir, Upstream: db.DSN, PoolMode: mode})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Stop(); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	return b, b.DSN(name)
}
