-- +goose NO TRANSACTION

-- Dead-lettering writes one entry into every index of dead_letters per
-- letter: at 12 indexes that is most of what a DeadLetterMany batch costs
-- (EXPLAIN (ANALYZE, BUFFERS, WAL) of a batch of 500 on 100,000 seeded
-- letters: ~12 index WAL records per letter besides the heap row, the
-- summary and search triggers well behind).
--
-- dead_letters_fingerprint_pending_idx (00008) is the one that no read
-- needs. Every read of "pending letters of fingerprint X" is served by
-- dead_letters_fingerprint_idx (00001) on the same key, filtering status:
--   * the count is error_groups.pending (kept by the triggers), never the
--     index (dlq.CountDeadLetters);
--   * the list and a bulk lane read LIMIT rows in (failed_at, id) order
--     along the fingerprint's range, a few dozen buffers for a page
--     (TestPendingFingerprintPlans);
--   * the delete trigger's first/last seen lookups used the status-less
--     index all along.
-- The other pending indexes stay: their counts have no summary and are
-- index-only scans on them, and the status-less error_class, task and
-- queue indexes are what the non-pending views need (dropping
-- dead_letters_error_class_idx turns those into sequential scans).
--
-- CONCURRENTLY, hence NO TRANSACTION: dropping must not wait on (or make
-- wait) the dead-lettering worker. IF EXISTS makes it rerunnable.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_pending_idx;

-- +goose Down
-- A build that failed half way leaves an invalid index: drop it first.
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_pending_idx;
CREATE INDEX CONCURRENTLY dead_letters_fingerprint_pending_idx
    ON dead_letters (fingerprint, failed_at DESC, id DESC) WHERE status = 'pending';
