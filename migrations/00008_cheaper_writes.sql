-- +goose NO TRANSACTION

-- Two changes that make writes cheaper, found by timing a bulk replay
-- batch (2,000 letters) on a million letters with EXPLAIN ANALYZE.
--
-- 1. The jobs checks on task and queue names used a bounded repetition,
--    ~ '^[A-Za-z0-9_.:-]{1,200}$'. PostgreSQL's regex engine unrolls a
--    bound into that many states, and matching one name cost ~30 us: more
--    than the row and all its indexes together, on every enqueue, retry
--    and replay. The same rule, as a length check and an unbounded class,
--    costs nothing measurable. The checks are equivalent, so every row
--    already satisfies the new ones.
--
-- 2. 00003 put status inside three indexes (and 00001 led one with it) so
--    that "pending letters of fingerprint X" and its count are one index
--    range. But a replay or a discard changes status, so every such update
--    added an entry to each of those four indexes (on top of the others,
--    since an update that changes an indexed column is never HOT). What
--    the console reads by status is almost always pending: the list's
--    default, every count and group, and every bulk selection. Partial
--    indexes WHERE status = 'pending' serve exactly those reads, and a
--    letter that is replayed or discarded gets no new entry in them. A
--    list of replayed or discarded letters uses the status-less index of
--    the same narrowing (00001/00002) and filters; those are the rare
--    views. Together with 00007 this halves what a bulk replay costs.
--
--    CONCURRENTLY, hence NO TRANSACTION: dead-lettering must not wait for
--    an index build on a million rows. The new indexes are built before
--    the old ones go, so no read loses its index in between; a build that
--    failed half way leaves an invalid index, so each is dropped first.

-- +goose Up
-- NOT VALID, then VALIDATE: the swap itself is instant (new rows are
-- checked from the moment it commits), and validating the existing rows
-- takes a lock that lets the queue go on enqueueing and claiming.
BEGIN;
ALTER TABLE jobs
    DROP CONSTRAINT jobs_task_valid,
    DROP CONSTRAINT jobs_queue_valid,
    ADD CONSTRAINT jobs_task_valid CHECK (length(task) BETWEEN 1 AND 200 AND task ~ '^[A-Za-z0-9_.:-]+$') NOT VALID,
    ADD CONSTRAINT jobs_queue_valid CHECK (length(queue) BETWEEN 1 AND 100 AND queue ~ '^[A-Za-z0-9_.:-]+$') NOT VALID;
COMMIT;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_task_valid;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_queue_valid;

DROP INDEX CONCURRENTLY IF EXISTS dead_letters_pending_idx;
CREATE INDEX CONCURRENTLY dead_letters_pending_idx
    ON dead_letters (failed_at DESC, id DESC) WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_reason_pending_idx;
CREATE INDEX CONCURRENTLY dead_letters_reason_pending_idx
    ON dead_letters (reason, failed_at DESC, id DESC) WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_error_class_pending_idx;
CREATE INDEX CONCURRENTLY dead_letters_error_class_pending_idx
    ON dead_letters (error_class, failed_at DESC, id DESC) WHERE status = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_pending_idx;
CREATE INDEX CONCURRENTLY dead_letters_fingerprint_pending_idx
    ON dead_letters (fingerprint, failed_at DESC, id DESC) WHERE status = 'pending';

DROP INDEX CONCURRENTLY IF EXISTS dead_letters_status_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_reason_status_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_error_class_status_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_status_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_status_idx;
CREATE INDEX CONCURRENTLY dead_letters_status_idx
    ON dead_letters (status, failed_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_reason_status_idx;
CREATE INDEX CONCURRENTLY dead_letters_reason_status_idx
    ON dead_letters (reason, status, failed_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_error_class_status_idx;
CREATE INDEX CONCURRENTLY dead_letters_error_class_status_idx
    ON dead_letters (error_class, status, failed_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_status_idx;
CREATE INDEX CONCURRENTLY dead_letters_fingerprint_status_idx
    ON dead_letters (fingerprint, status, failed_at DESC, id DESC);

DROP INDEX CONCURRENTLY IF EXISTS dead_letters_pending_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_reason_pending_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_error_class_pending_idx;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_fingerprint_pending_idx;

BEGIN;
ALTER TABLE jobs
    DROP CONSTRAINT jobs_task_valid,
    DROP CONSTRAINT jobs_queue_valid,
    ADD CONSTRAINT jobs_task_valid CHECK (task ~ '^[A-Za-z0-9_.:-]{1,200}$') NOT VALID,
    ADD CONSTRAINT jobs_queue_valid CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,100}$') NOT VALID;
COMMIT;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_task_valid;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_queue_valid;
