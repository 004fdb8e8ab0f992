-- +goose NO TRANSACTION

-- Two read paths of the console that plans showed to need the schema's help.
--
-- 1. The job list filters by task ("show me billing.charge"), newest first,
--    keyset-paginated on id. Without an index that leads with task, a task
--    that is rare among millions of jobs is a sequential scan. With
--    (task, state, id DESC), task + state is one index range, and task
--    alone is five (one per state) that the query merges, so no second
--    index on task is needed. Filtering by queue uses
--    jobs_state_queue_id_idx the same way.
--
--    CONCURRENTLY, hence NO TRANSACTION: the jobs table is the queue, and a
--    plain CREATE INDEX would block every enqueue, claim and ack for as long
--    as the build takes. A build that failed half way leaves an invalid
--    index behind, so the index is dropped first and built afresh.
--
-- 2. The overview charts letters per hour over 24 hours and per day over
--    14 days. dead_letter_inflow has a row per fingerprint, hour and queue:
--    on a million letters of a few thousand fingerprints, 14 days are
--    ~280,000 rows to sum on every 5-second refresh (and the daily table is
--    ~50,000). dead_letter_inflow_totals keeps one row per UTC hour, so
--    both charts read at most 336 rows. It is derived from
--    dead_letter_inflow by statement-level triggers, as 00003 derives the
--    daily table, so it follows every insert, purge and correction without
--    touching the dead-letter triggers. The current hour's row is updated by
--    every statement that dead-letters anything; the per-fingerprint rows
--    upstream already serialise a burst of one failure the same way, and
--    the lock is held only to the end of a short transaction.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_id_idx;
CREATE INDEX CONCURRENTLY jobs_task_state_id_idx ON jobs (task, state, id DESC);

-- One transaction, triggers before the backfill: creating a trigger locks
-- dead_letter_inflow against writes until COMMIT, so the backfill sees
-- every row written before it and no write can slip between the two.
BEGIN;

CREATE TABLE dead_letter_inflow_totals (
    hour timestamptz PRIMARY KEY, -- a whole UTC hour
    n    bigint      NOT NULL
);

-- +goose StatementBegin
-- An INSERT ... ON CONFLICT DO UPDATE on the inflow fires the insert
-- trigger with the rows it inserted and the update trigger with the rows it
-- updated, so between them every change is counted once.
CREATE FUNCTION dead_letter_inflow_totals_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_inflow_totals AS t (hour, n)
    SELECT date_trunc('hour', hour, 'UTC'), sum(n) FROM new_rows GROUP BY 1 ORDER BY 1
    ON CONFLICT (hour) DO UPDATE SET n = t.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dead_letter_inflow_totals_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_inflow_totals AS t (hour, n)
    SELECT hour, sum(delta) FROM (
        SELECT date_trunc('hour', hour, 'UTC') AS hour, -n AS delta FROM old_rows
        UNION ALL
        SELECT date_trunc('hour', hour, 'UTC'), n FROM new_rows
    ) x GROUP BY 1 HAVING sum(delta) <> 0 ORDER BY 1
    ON CONFLICT (hour) DO UPDATE SET n = t.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dead_letter_inflow_totals_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_inflow_totals t SET n = t.n - x.n
    FROM (SELECT date_trunc('hour', hour, 'UTC') AS hour, sum(n) AS n FROM old_rows GROUP BY 1) x
    WHERE t.hour = x.hour;
    DELETE FROM dead_letter_inflow_totals t
    USING (SELECT DISTINCT date_trunc('hour', hour, 'UTC') AS hour FROM old_rows) x
    WHERE t.hour = x.hour AND t.n <= 0;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letter_inflow_totals_insert AFTER INSERT ON dead_letter_inflow
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_totals_insert();
CREATE TRIGGER dead_letter_inflow_totals_update AFTER UPDATE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_totals_update();
CREATE TRIGGER dead_letter_inflow_totals_delete AFTER DELETE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_totals_delete();

INSERT INTO dead_letter_inflow_totals (hour, n)
SELECT date_trunc('hour', hour, 'UTC'), sum(n) FROM dead_letter_inflow GROUP BY 1;

COMMIT;

-- +goose Down
BEGIN;
DROP TRIGGER dead_letter_inflow_totals_delete ON dead_letter_inflow;
DROP TRIGGER dead_letter_inflow_totals_update ON dead_letter_inflow;
DROP TRIGGER dead_letter_inflow_totals_insert ON dead_letter_inflow;
DROP FUNCTION dead_letter_inflow_totals_delete();
DROP FUNCTION dead_letter_inflow_totals_update();
DROP FUNCTION dead_letter_inflow_totals_insert();
DROP TABLE dead_letter_inflow_totals;
COMMIT;
DROP INDEX CONCURRENTLY IF EXISTS jobs_task_state_id_idx;
