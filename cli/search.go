package cli

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/web/auth"
)

// The masked search text (00102_search.sql): the console writes its mask
// settings to the database at start, and the search rows built under other
// settings are rebuilt in the background; `redrive search rebuild` does
// the same by hand.

// masker builds the masker the console's settings describe, as web does.
func masker(ac auth.Config) (mask.Policy, error) {
	keys := ac.MaskKeys
	if keys == nil {
		keys = mask.DefaultKeys
	}
	m, err := mask.New(keys, ac.MaskPatterns)
	if err != nil {
		return mask.Policy{}, usagef("--mask-keys / --mask-patterns: %v", err)
	}
	return m, nil
}

// applyMaskPolicy writes the console's mask settings to the database and
// returns the console's search upkeep: it rebuilds the search rows built
// under other settings and, until ctx ends, indexes new letters for search
// (00102_search.sql). Run it beside the console, since on a million letters
// a rebuild takes minutes, during which searches skip those rows. A
// rebuild that fails is logged, not fatal: the rows it left stay out of
// search until the next start or `redrive search rebuild`.
func applyMaskPolicy(ctx context.Context, store *letters.Store, ac auth.Config, logger *slog.Logger) (func(context.Context), error) {
	m, err := masker(ac)
	if err != nil {
		return nil, err
	}
	changed, err := store.ApplyMaskPolicy(ctx, m)
	if err != nil {
		return nil, err
	}
	if changed {
		logger.Warn("mask settings changed: rebuilding the search text; until it is done, search skips the letters not yet rebuilt "+
			"(every console instance needs the same REDRIVE_MASK_KEYS and REDRIVE_MASK_PATTERNS)",
			"keys", strings.Join(m.Patterns(), ","), "patterns", len(m.TextPatterns()))
	}
	return func(ctx context.Context) {
		// New letters are indexed beside the rebuild, so that a rebuild of a
		// million rows does not keep them out of search for minutes.
		done := make(chan struct{})
		go func() {
			defer close(done)
			store.RunSearchIndexer(ctx, dlq.SearchIndexerConfig{Logger: logger})
		}()
		defer func() { <-done }()
		rebuildStale(ctx, store, logger)
	}, nil
}

// rebuildStale rebuilds the search rows built under other mask settings.
func rebuildStale(ctx context.Context, store *letters.Store, logger *slog.Logger) {
	st, err := store.MaskPolicy(ctx)
	if err != nil {
		// Stopping before the first read is not a failure.
		if ctx.Err() == nil {
			logger.Error("search rebuild", "err", err)
		}
		return
	}
	if st.Stale == 0 {
		return
	}
	start := time.Now()
	logger.Info("search rebuild started", "stale", st.Stale)
	n, err := store.RebuildSearch(ctx, 0, nil)
	if err != nil {
		if ctx.Err() == nil {
			logger.Error("search rebuild stopped; run `redrive search rebuild` or restart to finish", "rebuilt", n, "err", err)
		}
		return
	}
	logger.Info("search rebuild done", "rebuilt", n, "took", time.Since(start).Round(time.Millisecond))
}

func runSearch(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "rebuild" {
		fmt.Fprintln(e.stderr, "Usage: redrive search rebuild [flags]")
		return usagef("the search command has one subcommand: rebuild")
	}
	fs := newFlagSet("search rebuild", "Store these mask settings (the console's --mask-keys and --mask-patterns) as\n"+
		"the search's, then rebuild every letter's search text built under other\n"+
		"settings, in batches, while dead-lettering goes on, and index the letters\n"+
		"written since a console last ran. The console does both by itself; this is\n"+
		"for running them by hand, or to the end.", e.stderr)
	register(fs, databaseOptions, []string{"mask-keys", "mask-patterns", "batch"})
	f, err := parse(fs, args[1:], e.getenv)
	if err != nil {
		return err
	}
	m, err := masker(auth.Config{MaskKeys: mask.ParseKeys(f.str("mask-keys")), MaskPatterns: mask.ParsePatterns(f.str("mask-patterns"))})
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	store := letters.New(db)
	changed, err := store.ApplyMaskPolicy(ctx, m)
	if err != nil {
		return err
	}
	st, err := store.MaskPolicy(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "mask settings %s (version %d); %d letters to rebuild\n",
		map[bool]string{true: "stored", false: "unchanged"}[changed], st.Version, st.Stale)
	start, last := time.Now(), time.Now()
	n, err := store.RebuildSearch(ctx, f.integer("batch"), func(done int64) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(e.stdout, "  %d rebuilt\n", done)
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "rebuilt %d letters' search text in %s\n", n, time.Since(start).Round(time.Millisecond))
	// Letters written while no console ran (a seed, say) are still queued
	// for search: index them in large batches, one connection a core.
	start = time.Now()
	indexed, err := store.IndexLoadedDeadLetters(ctx, min(runtime.NumCPU(), 4))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "indexed %d new letters for search in %s\n", indexed, time.Since(start).Round(time.Millisecond))
	return nil
}
