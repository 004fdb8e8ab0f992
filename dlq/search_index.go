package dlq

import (
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
