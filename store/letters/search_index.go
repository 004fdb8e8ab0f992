package letters

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// IndexSearch builds the search rows of every queued letter, batch letters
// per statement (DefaultIndexBatch when < 1), each its own short
// transaction, and returns how many queued letters it took. It returns when
// the queue is empty; letters queued meanwhile are taken too.
func (s *Store) IndexSearch(ctx context.Context, batch int) (int64, error) {
	if batch < 1 {
		batch = dlq.DefaultIndexBatch
	}
	var total int64
	for {
		var n int64
		if err := s.db.GetContext(ctx, &n, `SELECT dead_letter_search_index($1)`, batch); err != nil {
			return total, fmt.Errorf("index search: %w", postgres.Translate(err))
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
		return 0, fmt.Errorf("count letters not yet searchable: %w", postgres.Translate(err))
	}
	return n, nil
}

// RunSearchIndexer indexes newly written letters for search until ctx
// ends: every cfg.Every, it drains the queue (IndexSearch). A failure is
// logged and retried at the next tick: the letters stay queued, so none is
// lost, only found later.
func (s *Store) RunSearchIndexer(ctx context.Context, cfg dlq.SearchIndexerConfig) {
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
