package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// jobKind is what a benchmark job does when it runs.
type jobKind string

const (
	// kindNoop jobs succeed at once: the drain measures the queue, not work.
	kindNoop jobKind = "noop"
	// kindFail jobs fail permanently on their only attempt (max attempts 1),
	// for the dead-lettering runs.
	kindFail jobKind = "fail"
)

// failMessage is the error every failing job returns. A dead letter that
// does not carry it (or that blames an expired lease) was misjudged.
const failMessage = "bench: card declined (permanent)"

// engine is one job queue under test, Redrive or River, driven only
// through its public Go API. The harness measures both with the same code.
type engine interface {
	// Name is the engine's name in the table.
	Name() string
	// Migrate creates the engine's schema in an empty database.
	Migrate(ctx context.Context, dsn string) error
	// Enqueue inserts n jobs of kind through the engine's batch API,
	// batch at a time, one batch per transaction.
	Enqueue(ctx context.Context, dsn string, kind jobKind, n, batch int) error
	// Unfinished reports whether any job is still waiting, running or due
	// for a retry.
	Unfinished(ctx context.Context, db *pgxpool.Pool) (bool, error)
	// Worker builds a worker process's worker with profile p. It is
	// connected and ready; run works jobs until its context ends, then
	// shuts down cleanly. close releases what Worker opened.
	Worker(ctx context.Context, dsn string, p Profile) (run func(context.Context) error, close func(), err error)
	// Latency enqueues samples jobs one at a time, gap apart, on an idle
	// worker of this process with LISTEN/NOTIFY on, and returns the time
	// from calling enqueue to the handler starting, for each.
	Latency(ctx context.Context, dsn string, samples int, gap time.Duration) ([]time.Duration, error)
	// Misjudged counts the failing jobs of a dead-letter run that were not
	// recorded as what they were: a permanent failure with failMessage. n
	// is how many failing jobs were enqueued; a job not recorded at all
	// counts too.
	Misjudged(ctx context.Context, db *pgxpool.Pool, n int) (int64, error)
}

// engines are the engines in the order of the first round.
func engines() []engine { return []engine{redriveEngine{}, riverEngine{}} }

// engineByName finds an engine for a child process.
func engineByName(name string) (engine, error) {
	for _, e := range engines() {
		if e.Name() == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

// profileByName finds a profile for a child process.
func profileByName(name string) (Profile, error) {
	for _, p := range []Profile{defaultProfile(), bestProfile(), deadLetterProfile()} {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("unknown profile %q", name)
}

// waitStart waits for a handler's start signal for at most d.
func waitStart(ctx context.Context, started <-chan time.Time, d time.Duration) (time.Time, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case at := <-started:
		return at, nil
	case <-t.C:
		return time.Time{}, fmt.Errorf("job did not start within %s", d)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// pause waits d unless ctx ends first.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
