package storetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/localpg"
)

// Replica starts a streaming replica of p (pg_basebackup -R, a second
// postgres), stopped when t ends, and returns it and a DSN to p's database
// "redrive" on it. It skips t when pg_basebackup is not installed; it comes
// with the postgresql package the suite needs anyway.
func Replica(t testing.TB, p *Private) (*localpg.Cluster, string) {
	t.Helper()
	if _, err := localpg.FindBaseBackup(); err != nil {
		t.Skipf("no streaming replica without pg_basebackup: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Not t.TempDir: as root, postgres runs as another user, who must be
	// able to reach the folder.
	dir, err := os.MkdirTemp("", "redrive-replica-pg-")
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.StartReplica(ctx, localpg.Config{Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("replica: %v", err)
	}
	t.Cleanup(func() {
		_ = r.Stop()
		os.RemoveAll(dir)
	})
	// The replica's database name is the primary's: it is a copy.
	return r, r.DSN("redrive")
}
