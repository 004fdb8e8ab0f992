package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive/seed"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letters"
)

func runSeed(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("seed", "Insert realistic synthetic dead letters in bulk, for benchmarks and demos.\n"+
		"Their search rows are a second step: a running console builds them in the\n"+
		"background (until then the list says how many letters search cannot find yet),\n"+
		"`redrive search rebuild` builds them at once, and --index-search waits for them.", e.stderr)
	register(fs, databaseOptions, []string{"dead-letters", "index-search", "ending-ago"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	n := f.integer("dead-letters")
	if n <= 0 {
		fs.Usage()
		return usagef("--dead-letters must be a positive number")
	}
	endingAgo := f.duration("ending-ago")
	if endingAgo < 0 {
		fs.Usage()
		return usagef("--ending-ago must not be negative")
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	later := !f.boolean("index-search")
	inserted, err := seed.DeadLetters(ctx, letters.New(db), groups.New(db), n, time.Now().Add(-endingAgo), seed.Options{SearchLater: later})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "inserted %d dead letters in %s\n", inserted, time.Since(start).Round(time.Millisecond))
	if later {
		fmt.Fprintln(e.stdout, "their search rows are built by a running console, or now by `redrive search rebuild`")
	}
	return nil
}
