package dlq

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// A letter's search row is built after the letter is written
// (00102_search.sql): the insert trigger queues the letter, and
// IndexSearch builds the search rows of the queued letters in batches.
// Dead-lettering then costs one small queue row per inserting statement
// (its letters' ids as one array) instead of the masked text and its
// trigram index entries, which were two thirds of what a letter cost. A
// letter not yet indexed has no search row, so search cannot find it by
// anything, let alone by a masked value; the search page says how many
// letters that is (SearchBacklog).

// DefaultIndexBatch is how many letters one indexing statement takes: a
// few hundred milliseconds of work at most, so a purge waiting for one of
// its letters never waits long.
const DefaultIndexBatch = 2000

// IndexSearch builds the search rows of every queued letter, batch letters
// per statement (DefaultIndexBatch when < 1), each its own short
// transaction, and returns how many queued letters it took. It returns when
// the queue is empty; letters queued meanwhile are taken too.
func (s *Store) IndexSearch(ctx context.Context, batch int) (int64, error) {
	if batch < 1 {
		batch = DefaultIndexBatch
	}
	var total int64
	for {
		var n int64
		if err := s.db.GetContext(ctx, &n, `SELECT dead_letter_search_index($1)`, batch); err != nil {
			return total, fmt.Errorf("index search: %w", translate(err))
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// searchBacklogCap bounds SearchBacklog's count: the page only needs to
// say "about this many", and a console that was down for a day may find a
// long queue.
const searchBacklogCap = 100_000

// SearchBacklog counts the letters written but not yet indexed for search,
// up to searchBacklogCap. The queue holds the ids of each inserting
// statement as one row, with their number beside them.
func (s *Store) SearchBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.GetContext(ctx, &n, `SELECT least(coalesce(sum(n), 0), $1) FROM (SELECT n FROM dead_letter_search_queue LIMIT $1) q`, searchBacklogCap)
	if err != nil {
		return 0, fmt.Errorf("count letters not yet searchable: %w", translate(err))
	}
	return n, nil
}

// SearchIndexerConfig configures RunSearchIndexer.
type SearchIndexerConfig struct {
	Logger *slog.Logger
	// Every is how often the indexer looks for new letters: how long a
	// just-written letter may wait to become searchable. Default 250 ms;
	// an empty queue costs one index probe per look.
	Every time.Duration
	// Batch is the letters per statement (DefaultIndexBatch when < 1).
	Batch int
}

// RunSearchIndexer indexes newly written letters for search until ctx
// ends: every cfg.Every, it drains the queue (IndexSearch). A failure is
// logged and retried at the next tick: the letters stay queued, so none is
// lost, only found later.
func (s *Store) RunSearchIndexer(ctx context.Context, cfg SearchIndexerConfig) {
	every := cfg.Every
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	failing := false
	for {
		_, err := s.IndexSearch(ctx, cfg.Batch)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			logger.Error("search indexer: letters stay unsearchable until it succeeds; retrying", "err", err)
			failing = true
		case err == nil && failing:
			logger.Info("search indexer recovered")
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
