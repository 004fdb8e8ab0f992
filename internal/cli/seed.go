package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/seed"
)

func runSeed(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("seed", "Insert realistic synthetic dead letters in bulk, for benchmarks and demos.", e.stderr)
	register(fs, databaseOptions, []string{"dead-letters"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	n := f.integer("dead-letters")
	if n <= 0 {
		fs.Usage()
		return usagef("--dead-letters must be a positive number")
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	inserted, err := seed.DeadLetters(ctx, dlq.NewStore(db), n, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "inserted %d dead letters in %s\n", inserted, time.Since(start).Round(time.Millisecond))
	return nil
}
