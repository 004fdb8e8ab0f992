-- A bulk load of letters that are all replayed or discarded writes no
-- pending rows.
--
-- `redrive seed` loads letters of every status: about 30% of them were
-- replayed or discarded. Each used to go in pending (the insert trigger
-- wrote its pending row and counted it pending) and be settled in the
-- same transaction (its pending row deleted, the counts moved, its outcome
-- written): a heap row and three index entries written, then deleted, for
-- each of 300,000 letters of a million.
--
-- Now the store loads settled letters in transactions of their own
-- (dlq.Store.LoadSettledDeadLetters), which set redrive.load_settled for
-- the transaction only (SET LOCAL) and write every letter's outcome before
-- they commit. The insert trigger, seeing it, writes no pending row and
-- counts nothing pending; the outcomes' trigger counts them replayed or
-- discarded, as an action would. Without the setting (every other insert:
-- a worker's dead-lettering, the general load) nothing changes.
--
-- The trigger is migration 00034's statement, whose parts skip the pending
-- rows and counts under the setting: the locks it takes are those of 00034
-- or fewer, in the same order.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    settled boolean := coalesce(current_setting('redrive.load_settled', true), '') = 'on';
BEGIN
    WITH n AS MATERIALIZED (
        SELECT id, failed_at, task, queue, reason, error_class, fingerprint, error_message FROM new_rows
    ), counts AS (
        INSERT INTO dead_letter_counts AS c (task, queue, status, n)
        SELECT task, queue, 'pending', count(*) FROM n WHERE NOT settled GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n
    ), groups AS (
        INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
        SELECT fingerprint, min(task), min(error_class),
               (array_agg(error_message ORDER BY failed_at DESC))[1],
               count(*), CASE WHEN settled THEN 0 ELSE count(*) END, min(failed_at), max(failed_at)
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
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM n WHERE NOT settled;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down
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
