-- +goose NO TRANSACTION

-- A letter's search row is built after the letter is written, not in the
-- statement that writes it.
--
-- Since 00007 the insert trigger built each new letter's masked search
-- text (00010) and its trigram index entries in the worker's own
-- dead-lettering statement. Measured with EXPLAIN (ANALYZE, WAL) on a batch
-- of 2,000 seeded letters, the trigger took 2.2 times as long as the insert
-- with all eleven of the letter's indexes: two thirds of what a letter cost.
-- A trigram entry for a few hundred characters is a few hundred GIN
-- insertions, and once the pending list is full the writer that filled it
-- merges it, so a burst of failures, just when an incident needs the
-- worker to keep up, paid for the search index of every letter.
--
-- The insert trigger now only queues the new letters' ids in
-- dead_letter_search_queue (one small btree entry each).
-- dead_letter_search_index(batch) builds the search rows of up to batch
-- queued letters, under the stored mask policy, in one statement; the
-- console runs it in the background (dlq.Store.IndexSearch), `redrive
-- search rebuild` runs it to the end, and `redrive seed` runs it after its
-- inserts. A letter is therefore found by search a moment after it is
-- written, and never by a value the mask policy hides: it has no search
-- row at all until one is built under the policy, and rows are built
-- exactly as before.
--
-- Nothing here touches the letters or rewrites a table: one small table,
-- two functions, each CREATE rerunnable.

-- +goose Up
BEGIN;
CREATE TABLE IF NOT EXISTS dead_letter_search_queue (
    dead_letter_id bigint PRIMARY KEY
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_search_queue (dead_letter_id) SELECT id FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Builds the search rows of up to batch queued letters, oldest first, and
-- returns how many queue entries it took (fewer than batch: the queue is
-- empty). SKIP LOCKED lets several indexers (two consoles, a seed) work at
-- once without waiting for each other. The letters are locked FOR KEY
-- SHARE, which no replay or discard conflicts with but a purge does: a
-- purge that deletes a letter being indexed waits, and its delete trigger
-- then sees the new search row and deletes it too; a letter already
-- purged is simply skipped, and so is its queue entry.
--
-- The policy is read once per call, as the old trigger read it once per
-- statement; a policy changed meanwhile leaves rows stamped with the old
-- version, which search skips and RebuildSearch rebuilds, as before.
-- ON CONFLICT: the letter of a Down-and-Up (or a rebuild after 00010)
-- that already has a row gets it rebuilt.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_index(batch int) RETURNS bigint LANGUAGE plpgsql AS $$
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
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letters d
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
$$;
-- +goose StatementEnd
COMMIT;

-- +goose Down
BEGIN;
-- 00010's trigger: new letters get their search rows in their own
-- statement again.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    INSERT INTO dead_letter_search (dead_letter_id, search_text, policy_version)
    SELECT id, dead_letter_masked_search_text(error_message, args, kwargs, coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
           coalesce(pol.version, 0)
    FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
COMMIT;

-- The letters still queued: written before the trigger above, so nothing
-- else will give them a search row.
SELECT dead_letter_search_index(2147483647);

BEGIN;
DROP FUNCTION IF EXISTS dead_letter_search_index(int);
DROP TABLE IF EXISTS dead_letter_search_queue;
COMMIT;
