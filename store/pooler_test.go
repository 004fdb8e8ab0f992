package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

func TestBehindTransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	_, txDSN := storetest.Bouncer(t, db, "transaction")
	_, sessionDSN := storetest.Bouncer(t, db, "session")
	for _, c := range []struct {
		name, dsn string
		want      bool
	}{{"direct", db.DSN, false}, {"transaction pooler", txDSN, true}, {"session pooler", sessionDSN, false}} {
		conn, err := postgres.Open(ctx, c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 { // the answer must not depend on which sessions are idle
			got, err := postgres.BehindTransactionPooler(ctx, conn)
			if err != nil || got != c.want {
				t.Errorf("%s: behind a transaction pooler = %v (%v), want %v", c.name, got, err, c.want)
			}
		}
		conn.Close()
	}
}

// throughPooler opens the rooms on db through a PgBouncer of the test's
// own in transaction mode, as postgres.Open does for a console behind one.
func throughPooler(t *testing.T, db *storetest.DB) *storetest.Stores {
	t.Helper()
	_, dsn := storetest.Bouncer(t, db, "transaction")
	pooled, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pooled.Close() })
	return storetest.NewStores(pooled)
}

// Through PgBouncer in transaction mode lib/pq's default two round trips
// per query broke: "bind message supplies 2 parameters, but prepared
// statement "" requires 4", "unnamed prepared statement does not exist".
// Many clients over few server connections, JSON and bytea parameters.
func TestQueriesThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ps := throughPooler(t, db)
	now := time.Now()
	if _, err := store.Access.CreateUser(ctx, dlq.NewUser{Name: "ci", Role: dlq.RoleAdmin, PasswordHash: []byte("x"), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 25 {
				err := func() error {
					res, err := ps.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: "t.ok", Args: []byte(fmt.Sprintf(`[%d, %d]`, g, i)),
						Kwargs: []byte(`{"k": "v"}`), IdempotencyKey: fmt.Sprintf("k-%d-%d", g, i)})
					if err != nil {
						return err
					}
					j, err := ps.Queue.Job(ctx, res.Job.ID)
					if err != nil {
						return err
					}
					if string(j.Args) != fmt.Sprintf(`[%d, %d]`, g, i) {
						return fmt.Errorf("job %d has args %s", j.ID, j.Args)
					}
					if i%5 == 0 {
						secret := fmt.Sprintf("secret-%d-%d", g, i)
						if _, err := ps.Access.CreateToken(ctx, dlq.NewToken{UserName: "ci", Label: secret, Hash: dlq.HashToken(secret), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
							return err
						}
						if _, tok, err := ps.Access.UserByToken(ctx, dlq.HashToken(secret), now); err != nil || tok.Label != secret {
							return fmt.Errorf("token %s: %v, %v", secret, tok.Label, err)
						}
					}
					return nil
				}()
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of 400 rounds failed through the pooler, e.g.:\n%s", len(errs), strings.Join(errs[:min(5, len(errs))], "\n"))
	}
}

func TestMigrateRefusesATransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	_, dsn := storetest.Bouncer(t, db, "transaction")
	pooled, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Close()
	if _, err := postgres.Migrate(ctx, pooled, nil); !errors.Is(err, postgres.ErrTransactionPooler) || !strings.Contains(err.Error(), "nothing migrated") {
		t.Fatalf("migrate through a transaction pooler: %v, want ErrTransactionPooler", err)
	}
	// Locks of this test's database only: the cluster is shared with
	// the tests running beside it.
	var locks int
	if err := db.Get(&locks, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil || locks != 0 {
		t.Fatalf("%d advisory locks left behind (%v)", locks, err)
	}
	// A direct connection migrates (here: finds nothing to do).
	if _, err := postgres.Migrate(ctx, db.DB, nil); err != nil {
		t.Fatal(err)
	}
}
