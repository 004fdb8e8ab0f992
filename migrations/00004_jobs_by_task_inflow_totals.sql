-- +goose NO TRANSACTION

-- The console's job list filters by task ("show me billing.charge"),
-- newest first, keyset-paginated on id. Without an index that leads with
-- task, a task that is rare among millions of jobs is a sequential scan.
-- With (task, state, id DESC), task + state is one index range, and task
-- alone is five (one per state) merged by the query, so no second index
-- on task is needed. Filtering by queue uses jobs_state_queue_id_idx the
-- same way.
--
-- CONCURRENTLY: the jobs table is the queue; a plain CREATE INDEX would
-- block every enqueue, claim and ack for as long as the build takes.

-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_task_state_id_idx ON jobs (task, state, id DESC);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_id_idx;
