-- +goose NO TRANSACTION

-- Free-text search moves out of the dead_letters row into a side table.
--
-- 00002 kept the searchable text (error message, args, kwargs) as a
-- generated column of dead_letters with a trigram GIN index on it. A
-- replay or a discard changes status, which several indexes cover, so the
-- UPDATE cannot be HOT: every index of the table gets an entry for the new
-- row version, the GIN index included, and a trigram entry for ~3 kB of
-- text is a few hundred index insertions. Measured on a million letters,
-- that index was about half of what a bulk replay of 100,000 letters cost.
--
-- A letter's message and arguments never change once it is written (an
-- edit-and-replay enqueues a new job and leaves the letter as it was), so
-- the text and its index belong in a row of their own that a replay never
-- touches. dead_letter_search has one row per letter, written by a
-- statement-level trigger in the same statement that writes the letter
-- and deleted with it, so search always sees exactly the letters there are.
-- The list asks for `id IN (SELECT dead_letter_id FROM dead_letter_search
-- WHERE search_text ILIKE ...)`, which the planner answers from the
-- trigram index and joins back by primary key.
--
-- No foreign key: ON DELETE CASCADE would delete row by row, and a purge of
-- a million letters is one statement; the delete trigger does it as one
-- set-based statement instead.
--
-- NO TRANSACTION, so that no step holds a lock that stops dead-lettering
-- for long (on a million letters the backfill and the index build took 87 s
-- here, while a letter was dead-lettered every 0.2 s without waiting): the
-- triggers go in first, in a short transaction, so
-- every letter written from then on gets its search row; the backfill then
-- copies the older ones while writes go on; the index is built
-- CONCURRENTLY; only dropping the old column takes an exclusive lock, and
-- that is instant. Each step can run again, so a migration interrupted
-- half way finishes when it is rerun.


-- +goose Up
BEGIN;
CREATE TABLE IF NOT EXISTS dead_letter_search (
    dead_letter_id bigint PRIMARY KEY,
    search_text    text   NOT NULL
);

-- The text is capped so one huge payload cannot bloat the index; the same
-- expression 00002 used, so search answers exactly as before.
CREATE OR REPLACE FUNCTION dead_letter_search_text(error_message text, args jsonb, kwargs jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_search (dead_letter_id, search_text)
    SELECT id, dead_letter_search_text(error_message, args, kwargs) FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dead_letter_search s USING old_rows o WHERE s.dead_letter_id = o.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Letters are not edited today; should one ever be, its search text
-- follows. A row trigger limited to these columns never fires for a
-- replay, a discard or a restore, which do not set them.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_search SET search_text = dead_letter_search_text(NEW.error_message, NEW.args, NEW.kwargs)
    WHERE dead_letter_id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS dead_letter_search_insert ON dead_letters;
CREATE TRIGGER dead_letter_search_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_insert();
DROP TRIGGER IF EXISTS dead_letter_search_delete ON dead_letters;
CREATE TRIGGER dead_letter_search_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_delete();
DROP TRIGGER IF EXISTS dead_letter_search_update ON dead_letters;
CREATE TRIGGER dead_letter_search_update AFTER UPDATE OF error_message, args, kwargs ON dead_letters
    FOR EACH ROW EXECUTE FUNCTION dead_letter_search_update();
COMMIT;

-- The letters written before the triggers. A letter the triggers already
-- covered is skipped; one purged while this ran may leave a row behind,
-- which the next statement removes.
INSERT INTO dead_letter_search (dead_letter_id, search_text)
SELECT id, dead_letter_search_text(error_message, args, kwargs) FROM dead_letters
ON CONFLICT (dead_letter_id) DO NOTHING;

DELETE FROM dead_letter_search s WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = s.dead_letter_id);

-- Built after the backfill: one sorted build is far cheaper than a
-- million pending-list insertions.
DROP INDEX CONCURRENTLY IF EXISTS dead_letter_search_text_idx;
CREATE INDEX CONCURRENTLY dead_letter_search_text_idx ON dead_letter_search USING gin (search_text gin_trgm_ops);

DROP INDEX CONCURRENTLY IF EXISTS dead_letters_search_idx;
ALTER TABLE dead_letters DROP COLUMN IF EXISTS search_text;

-- +goose Down
ALTER TABLE dead_letters ADD COLUMN IF NOT EXISTS search_text text GENERATED ALWAYS AS (
    left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000)
) STORED;
DROP INDEX CONCURRENTLY IF EXISTS dead_letters_search_idx;
CREATE INDEX CONCURRENTLY dead_letters_search_idx ON dead_letters USING gin (search_text gin_trgm_ops);
BEGIN;
DROP TRIGGER IF EXISTS dead_letter_search_update ON dead_letters;
DROP TRIGGER IF EXISTS dead_letter_search_delete ON dead_letters;
DROP TRIGGER IF EXISTS dead_letter_search_insert ON dead_letters;
DROP FUNCTION IF EXISTS dead_letter_search_update();
DROP FUNCTION IF EXISTS dead_letter_search_delete();
DROP FUNCTION IF EXISTS dead_letter_search_insert();
DROP FUNCTION IF EXISTS dead_letter_search_text(text, jsonb, jsonb);
DROP TABLE IF EXISTS dead_letter_search;
COMMIT;
