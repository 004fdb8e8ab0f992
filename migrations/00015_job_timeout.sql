-- A per-job timeout, set at enqueue (timeout_seconds in the API, --timeout
-- in `redrive enqueue`): the limit on one attempt of this job, instead of
-- its task's timeout or the worker's default, and still under the worker's
-- cap (--job-timeout). NULL: none of its own, as for every existing job.
--
-- A nullable column without a default changes only the catalogue: no
-- rewrite, no scan. The brief ACCESS EXCLUSIVE lock it takes must not queue
-- claims behind a long transaction, so it gives up after 5 s instead
-- (rerun the migration); SET LOCAL keeps the setting to this migration's
-- transaction. The range is checked at enqueue, not by a CHECK
-- constraint, which would scan the table under that lock.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS timeout_ms bigint;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs DROP COLUMN IF EXISTS timeout_ms;
