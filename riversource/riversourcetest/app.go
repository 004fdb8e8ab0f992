// Package riversourcetest runs a River app for the tests of River as a
// source: River's own migrations in a test's database, and a River client
// working the test's workers, stopped when the test ends.
package riversourcetest

import (
	"context"
	"fmt"
	"sync/atomic"
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
		// River's cleaner deletes discarded jobs after 7 days by default;
		// tests write discards a week or two old, which it would take
		// away before the source imports them (a 1-in-many failure under
		// load: 4,001 letters of 4,002). Kept for good, as a team that
		// wants its dead jobs in Redrive would keep them until imported.
		DiscardedJobRetentionPeriod: -1,
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

// ShipArgs is the test apps' order to ship, a job of kind ship_order.
type ShipArgs struct {
	Order string `json:"order"`
}

// Kind implements river.JobArgs.
func (ShipArgs) Kind() string { return "ship_order" }

// ShipWorker books a courier for the order, whose API refuses until Fixed
// says the fix shipped.
type ShipWorker struct {
	river.WorkerDefaults[ShipArgs]
	Fixed *atomic.Bool
}

// Work implements river.Worker.
func (w ShipWorker) Work(_ context.Context, job *river.Job[ShipArgs]) error {
	if !w.Fixed.Load() {
		return fmt.Errorf("courier API answered 401 Unauthorized for order %s: token expired", job.Args.Order)
	}
	return nil
}

// Ship inserts n orders to ship, each with one attempt, tagged checkout,
// and returns their River job ids: River discards each until the fix.
func Ship(t testing.TB, client *river.Client[pgx.Tx], n int) []int64 {
	t.Helper()
	var jobs []int64
	for i := range n {
		res, err := client.Insert(context.Background(), ShipArgs{Order: fmt.Sprintf("ord_%04d", 7100+i)},
			&river.InsertOpts{MaxAttempts: 1, Queue: "payments", Tags: []string{"checkout"}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, res.Job.ID)
	}
	return jobs
}
