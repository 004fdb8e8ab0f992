-- The search queue holds one row per inserting statement, not one per
-- letter.
--
-- Since 00016 the letters' insert trigger queued each new letter's id in
-- dead_letter_search_queue: a heap row and a btree entry for every letter,
-- taken and deleted again by the indexer a moment later. Measured on
-- `redrive seed --dead-letters 1000000` (pg_waldump, perf): a million
-- Heap/INSERT records and a million btree leaf insertions, about 180 MB of
-- the seed's 2.9 GB of WAL and 3% of its server time; a worker's
-- dead-lettering batch paid the same per letter.
--
-- Now the trigger queues the statement's new ids as one sorted array
-- (first_id, its smallest, is the key; n is its length, read without
-- detoasting the array). dead_letter_search_index(batch) takes queued
-- arrays oldest first until it has batch ids, and splits the array that
-- would overflow, leaving its remainder queued under its own first id.
-- Everything else is as 00016 says: SKIP LOCKED lets indexers work side by
-- side, the letters are locked FOR KEY SHARE while their rows are built, a
-- purged letter is skipped, and the function returns how many ids it took
-- (fewer than batch: the queue is empty).
--
-- The queue's rows are locked one at a time, through a cursor: a single
-- SELECT ... LIMIT would lock every row it might need, and with a seed's
-- ten arrays of 100,000 ids one indexer would hold them all while the
-- other found nothing to do.

-- +goose Up
CREATE TABLE dead_letter_search_batches (
    first_id bigint PRIMARY KEY,
    ids bigint[] NOT NULL,
    n integer NOT NULL CHECK (n = cardinality(ids) AND n > 0)
);
-- A seed's arrays are 800 KB: lz4 packs and unpacks them several times as
-- fast as the default pglz.
ALTER TABLE dead_letter_search_batches ALTER COLUMN ids SET COMPRESSION lz4;

-- Letters queued before this migration go in as arrays of up to 10,000
-- consecutive queued ids.
INSERT INTO dead_letter_search_batches (first_id, ids, n)
SELECT min(dead_letter_id), array_agg(dead_letter_id ORDER BY dead_letter_id), count(*)
FROM (SELECT dead_letter_id, (row_number() OVER (ORDER BY dead_letter_id) - 1) / 10000 AS chunk
      FROM dead_letter_search_queue) q
GROUP BY chunk;
DROP TABLE dead_letter_search_queue;
ALTER TABLE dead_letter_search_batches RENAME TO dead_letter_search_queue;
ALTER INDEX dead_letter_search_batches_pkey RENAME TO dead_letter_search_queue_pkey;

-- 00035's trigger, but for the one queue row (HAVING: a statement that
-- inserted nothing queues nothing).
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
        INSERT INTO dead_letter_search_queue (first_id, ids, n)
        SELECT min(id), array_agg(id ORDER BY id), count(*) FROM n HAVING count(*) > 0
    )
    INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM n WHERE NOT settled;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_index(batch integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
    queued CURSOR FOR SELECT first_id, n FROM dead_letter_search_queue ORDER BY first_id FOR UPDATE SKIP LOCKED;
    entry_first bigint;
    entry_n integer;
    whole bigint[] := '{}';   -- first ids of the arrays taken whole
    split_first bigint;       -- first id of the array taken in part
    split_ids bigint[] := '{}';
    room integer := greatest(batch, 1);
    taken bigint;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    OPEN queued;
    WHILE room > 0 LOOP
        FETCH queued INTO entry_first, entry_n;
        EXIT WHEN NOT FOUND;
        IF entry_n <= room THEN
            whole := whole || entry_first;
            room := room - entry_n;
        ELSE
            split_first := entry_first;
            SELECT ids[1:room] INTO split_ids FROM dead_letter_search_queue WHERE first_id = split_first;
            UPDATE dead_letter_search_queue
            SET first_id = ids[room + 1], ids = ids[room + 1:], n = n - room
            WHERE first_id = split_first;
            room := 0;
        END IF;
    END LOOP;
    CLOSE queued;
    WITH gone AS (
        DELETE FROM dead_letter_search_queue WHERE first_id = ANY (whole) RETURNING ids
    ), taken_ids AS (
        SELECT unnest(gone.ids) AS id FROM gone
        UNION ALL
        SELECT unnest(split_ids)
    ), letters AS (
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letter_records d
        WHERE d.id IN (SELECT id FROM taken_ids)
        FOR KEY SHARE OF d
    ), built AS (
        INSERT INTO dead_letter_search AS s (dead_letter_id, search_text, policy_version)
        SELECT id, dead_letter_masked_search_text(error_message, args, kwargs,
                coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
            coalesce(pol.version, 0)
        FROM letters ORDER BY id
        ON CONFLICT (dead_letter_id) DO UPDATE SET search_text = EXCLUDED.search_text,
            policy_version = EXCLUDED.policy_version
        RETURNING 1
    )
    SELECT count(*) INTO taken FROM taken_ids;
    RETURN taken;
END;
$$;
-- +goose StatementEnd

-- +goose Down
CREATE TABLE dead_letter_search_ids (
    dead_letter_id bigint PRIMARY KEY
);
INSERT INTO dead_letter_search_ids (dead_letter_id)
SELECT DISTINCT unnest(ids) FROM dead_letter_search_queue;
DROP TABLE dead_letter_search_queue;
ALTER TABLE dead_letter_search_ids RENAME TO dead_letter_search_queue;
ALTER INDEX dead_letter_search_ids_pkey RENAME TO dead_letter_search_queue_pkey;

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

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_index(batch integer)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    pol mask_policy;
    n bigint;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    WITH taken AS (
        DELETE FROM dead_letter_search_queue q
        WHERE q.dead_letter_id IN (
            SELECT dead_letter_id FROM dead_letter_search_queue ORDER BY dead_letter_id LIMIT batch
            FOR UPDATE SKIP LOCKED)
        RETURNING q.dead_letter_id
    ), letters AS (
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letter_records d
        WHERE d.id IN (SELECT dead_letter_id FROM taken)
        FOR KEY SHARE OF d
    ), built AS (
        INSERT INTO dead_letter_search AS s (dead_letter_id, search_text, policy_version)
        SELECT id, dead_letter_masked_search_text(error_message, args, kwargs,
                coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
            coalesce(pol.version, 0)
        FROM letters ORDER BY id
        ON CONFLICT (dead_letter_id) DO UPDATE SET search_text = EXCLUDED.search_text,
            policy_version = EXCLUDED.policy_version
        RETURNING 1
    )
    SELECT count(*) INTO n FROM taken;
    RETURN n;
END;
$function$;
-- +goose StatementEnd
