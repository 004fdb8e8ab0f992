-- +goose NO TRANSACTION

-- Half the index writes of an acknowledgement. Marking a job succeeded is
-- not a HOT update (state is in every partial index's predicate), so it
-- added an entry to each index the new row version belongs to: the
-- primary key, jobs_cleanable_idx, and the console's two,
-- jobs_state_queue_idx (state, queue, id DESC) and jobs_task_state_idx
-- (task, state, id DESC). EXPLAIN (ANALYZE, BUFFERS, WAL) of one
-- acknowledgement of 1,000 jobs among 200,000: 16,400 buffers, 6.0 WAL
-- records and 790 bytes a job, ~30 ms; with succeeded jobs out of the
-- console's two, 10,350 buffers, 4.0 records and 525 bytes, ~16 ms.
--
-- 1. jobs_succeeded_idx (queue, task, id DESC NULLS LAST) holds the succeeded jobs
--    no letter links to, and serves both the console and the cleaner, so
--    an acknowledgement writes the primary key and this one only. The
--    console reads a queue's or a task's succeeded jobs newest first from
--    one range per (queue, task) pair (dlq/jobs_query.go finds the pairs
--    by skipping through the index); the cleaner walks the same ranges
--    oldest first, up to the first job created after its cutoff
--    (dlq/cleaner.go), reading finished_at from the index itself.
--    NULLS LAST, though id is never NULL, is so that only this index
--    serves the order the queries ask for (id DESC NULLS LAST, or
--    ASC NULLS FIRST): given ORDER BY id within a pair, the planner, not
--    knowing how rare the pair is, walked the primary key backwards and
--    filtered every succeeded job for a pair of 20 (TestSucceededJobListCostIsFlat).
-- 2. The console's two indexes keep the succeeded replays (a letter links
--    to them, so the cleaner keeps them, and they would otherwise sit in
--    the cleaner's ranges for ever) and leave the other succeeded jobs out.
-- 3. jobs_cleanable_idx (finished_at) goes: the index above replaces it.
--
-- CONCURRENTLY, hence NO TRANSACTION: claims and acknowledgements must not
-- wait for an index build. Each new index is built under a new name
-- before the old one goes, so no read loses its index in between, and
-- renamed after; a build that failed half way leaves an invalid index, so
-- each is dropped first and the migration can run again.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS jobs_succeeded_idx;
CREATE INDEX CONCURRENTLY jobs_succeeded_idx ON jobs (queue, task, id DESC NULLS LAST) INCLUDE (finished_at)
	WHERE state = 'succeeded' AND replay_of IS NULL;

DROP INDEX CONCURRENTLY IF EXISTS jobs_state_queue_unfinished_idx;
CREATE INDEX CONCURRENTLY jobs_state_queue_unfinished_idx ON jobs (state, queue, id DESC)
	WHERE state <> 'running' AND (state <> 'succeeded' OR replay_of IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS jobs_state_queue_idx;
ALTER INDEX jobs_state_queue_unfinished_idx RENAME TO jobs_state_queue_idx;

DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_unfinished_idx;
CREATE INDEX CONCURRENTLY jobs_task_state_unfinished_idx ON jobs (task, state, id DESC)
	WHERE state <> 'running' AND (state <> 'succeeded' OR replay_of IS NOT NULL);
DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_idx;
ALTER INDEX jobs_task_state_unfinished_idx RENAME TO jobs_task_state_idx;

DROP INDEX CONCURRENTLY IF EXISTS jobs_cleanable_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_cleanable_idx;
CREATE INDEX CONCURRENTLY jobs_cleanable_idx ON jobs (finished_at) WHERE state = 'succeeded' AND replay_of IS NULL;

DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_all_idx;
CREATE INDEX CONCURRENTLY jobs_task_state_all_idx ON jobs (task, state, id DESC) WHERE state <> 'running';
DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_idx;
ALTER INDEX jobs_task_state_all_idx RENAME TO jobs_task_state_idx;

DROP INDEX CONCURRENTLY IF EXISTS jobs_state_queue_all_idx;
CREATE INDEX CONCURRENTLY jobs_state_queue_all_idx ON jobs (state, queue, id DESC) WHERE state <> 'running';
DROP INDEX CONCURRENTLY IF EXISTS jobs_state_queue_idx;
ALTER INDEX jobs_state_queue_all_idx RENAME TO jobs_state_queue_idx;

DROP INDEX CONCURRENTLY IF EXISTS jobs_succeeded_idx;
