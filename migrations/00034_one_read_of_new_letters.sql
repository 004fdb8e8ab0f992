-- A batch of new letters is read once by its insert trigger.
--
-- Each statement that inserts letters hands its AFTER ... REFERENCING NEW
-- TABLE triggers the new rows, whole: tracebacks and attempt histories
-- included, about 2.8 KB a letter, and past work_mem Postgres keeps them in
-- a temporary file. The two insert triggers read them five times, one
-- statement each: the counts, the error groups, the inflow, the pending
-- rows (dead_letters_summarise_insert) and the search queue
-- (dead_letter_search_insert). Seeding 1,000,000 letters in batches of
-- 100,000, those five statements took 20 s of the server's time
-- (pg_stat_statements), most of it reading the wide rows again.
--
-- Now one statement reads the columns they need (a few narrow ones and the
-- message) into a materialised CTE once, and writes all five from it; the
-- search queue's trigger goes, its insert moves here. The same seed: 16 s
-- for the one statement. A worker's dead-lettering batch runs the same
-- trigger and saves the same reads.
--
-- The statement's parts lock what they update in the same order every
-- time (one plan, each part sorted by its key), as the separate statements
-- did, so concurrent dead-lettering batches still cannot deadlock.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH n AS MATERIALIZED (
        SELECT id, failed_at, task, queue, reason, error_class, fingerprint, error_message FROM new_rows
    ), counts AS (
        INSERT INTO dead_letter_counts AS c (task, queue, status, n)
        SELECT task, queue, 'pending', count(*) FROM n GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n
    ), groups AS (
        INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
        SELECT fingerprint, min(task), min(error_class),
               (array_agg(error_message ORDER BY failed_at DESC))[1],
               count(*), count(*), min(failed_at), max(failed_at)
        FROM n GROUP BY fingerprint ORDER BY fingerprint
        ON CONFLICT (fingerprint) DO UPDATE SET
            total = g.total + EXCLUDED.total,
            pending = g.pending + EXCLUDED.pending,
            first_seen = least(g.first_seen, EXCLUDED.first_seen),
            last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
            sample_message = CASE WHEN EXCLUDED.last_seen >= g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END
    ), inflow AS (
        INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
        SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
        FROM n GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n
    ), search AS (
        INSERT INTO dead_letter_search_queue (dead_letter_id) SELECT id FROM n
    )
    INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM n;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER dead_letter_search_insert ON dead_letter_records;

-- +goose Down
CREATE TRIGGER dead_letter_search_insert AFTER INSERT ON dead_letter_records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_insert();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_counts AS c (task, queue, status, n)
    SELECT task, queue, 'pending', count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;

    INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
    SELECT fingerprint, min(task), min(error_class),
           (array_agg(error_message ORDER BY failed_at DESC))[1],
           count(*), count(*), min(failed_at), max(failed_at)
    FROM new_rows GROUP BY fingerprint ORDER BY fingerprint
    ON CONFLICT (fingerprint) DO UPDATE SET
        total = g.total + EXCLUDED.total,
        pending = g.pending + EXCLUDED.pending,
        first_seen = least(g.first_seen, EXCLUDED.first_seen),
        last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
        sample_message = CASE WHEN EXCLUDED.last_seen >= g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END;

    INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
    SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;

    INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
