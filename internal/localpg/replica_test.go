package localpg_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redrive/redrive/internal/localpg"
	"github.com/redrive/redrive/store/storetest"
)

// A replica started from a running cluster is a hot standby that follows
// it: it has what the primary had, refuses writes, and receives later
// writes by streaming; stopped and started again, it catches up.
func TestStartReplicaStreamsFromThePrimary(t *testing.T) {
	t.Parallel()
	if _, err := localpg.FindBaseBackup(); err != nil {
		t.Skipf("no streaming replica without pg_basebackup: %v", err)
	}
	ctx := context.Background()
	primary, primaryDB := startCluster(t, "localpg-primary-")
	if _, err := primaryDB.Exec(`CREATE TABLE t (n int); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "localpg-replica-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	replica, err := primary.StartReplica(ctx, localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	if replica.Port() == primary.Port() {
		t.Fatalf("replica listens on the primary's port %d", replica.Port())
	}
	replicaDB, err := sql.Open("postgres", replica.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer replicaDB.Close()
	var inRecovery bool
	if err := replicaDB.QueryRow(`SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("replica in recovery: %v (%v), want true", inRecovery, err)
	}
	if _, err := replicaDB.Exec(`INSERT INTO t VALUES (2)`); err == nil {
		t.Fatal("the replica accepted a write")
	}
	waitRows(t, replicaDB, 1)
	if _, err := primaryDB.Exec(`INSERT INTO t VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	waitRows(t, replicaDB, 2)

	// Stopped, it misses a write; started again, it catches up from its
	// own data folder.
	if err := replica.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := primaryDB.Exec(`INSERT INTO t VALUES (3)`); err != nil {
		t.Fatal(err)
	}
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitRows(t, replicaDB, 3)
}

func startCluster(t *testing.T, prefix string) (*localpg.Cluster, *sql.DB) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := localpg.Start(context.Background(), localpg.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	db, err := sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return c, db
}

// waitRows waits until table t on db has n rows.
func waitRows(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	var got int
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("replica has %d rows (%v), want %d", got, err, n)
		}
	}()
	storetest.WaitFor(t, 30*time.Second, fmt.Sprintf("the replica to have %d rows", n), func() bool {
		err = db.QueryRow(`SELECT count(*) FROM t`).Scan(&got)
		return err == nil && got == n
	})
}
