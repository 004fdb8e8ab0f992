// Package riversourcetest runs a River app for the tests of River as a
// source: River's own migrations in a test's database, and a River client
// working the test's workers, stopped when the test ends.
package riversourcetest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// App migrates River into the database at dsn and starts a client working
// the default and payments queues with the workers add registers. It
// returns the pool River uses and the client.
func App(t testing.TB, dsn string, add ...func(*river.Workers)) (*pgxpool.Pool, *river.Client[pgx.Tx]) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("migrate river: %v", err)
	}
	workers := river.NewWorkers()
	for _, a := range add {
		a(workers)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}, "payments": {MaxWorkers: 20}},
		Workers:           workers,
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(stop); err != nil {
			t.Logf("stop river: %v", err)
		}
	})
	return pool, client
}
