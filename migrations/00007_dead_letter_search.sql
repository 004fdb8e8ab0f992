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

-- +goose Up
-- +goose StatementBegin
CREATE TABLE dead_letter_search (
    dead_letter_id bigint PRIMARY KEY,
    search_text    text   NOT NULL
);

-- The text is capped so one huge payload cannot bloat the index; the same
-- expression 00002 used, so search answers exactly as before.
CREATE FUNCTION dead_letter_search_text(error_message text, args jsonb, kwargs jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000);

CREATE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_search (dead_letter_id, search_text)
    SELECT id, dead_letter_search_text(error_message, args, kwargs) FROM new_rows;
    RETURN NULL;
END;
$$;

CREATE FUNCTION dead_letter_search_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dead_letter_search s USING old_rows o WHERE s.dead_letter_id = o.id;
    RETURN NULL;
END;
$$;

-- Letters are not edited today; should one ever be, its search text
-- follows. A row trigger limited to these columns never fires for a
-- replay, a discard or a restore, which do not set them.
CREATE FUNCTION dead_letter_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_search SET search_text = dead_letter_search_text(NEW.error_message, NEW.args, NEW.kwargs)
    WHERE dead_letter_id = NEW.id;
    RETURN NULL;
END;
$$;

-- Triggers before the backfill, in one transaction: creating a trigger
-- locks dead_letters against writes until COMMIT, so the backfill sees
-- every letter written before it and none can slip between the two.
CREATE TRIGGER dead_letter_search_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_insert();
CREATE TRIGGER dead_letter_search_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_search_delete();
CREATE TRIGGER dead_letter_search_update AFTER UPDATE OF error_message, args, kwargs ON dead_letters
    FOR EACH ROW EXECUTE FUNCTION dead_letter_search_update();

INSERT INTO dead_letter_search (dead_letter_id, search_text)
SELECT id, search_text FROM dead_letters;

-- Built after the backfill: one sorted build is far cheaper than a
-- million pending-list insertions.
CREATE INDEX dead_letter_search_text_idx ON dead_letter_search USING gin (search_text gin_trgm_ops);

DROP INDEX dead_letters_search_idx;
ALTER TABLE dead_letters DROP COLUMN search_text;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
ALTER TABLE dead_letters ADD COLUMN search_text text GENERATED ALWAYS AS (
    left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000)
) STORED;
CREATE INDEX dead_letters_search_idx ON dead_letters USING gin (search_text gin_trgm_ops);
DROP TRIGGER dead_letter_search_update ON dead_letters;
DROP TRIGGER dead_letter_search_delete ON dead_letters;
DROP TRIGGER dead_letter_search_insert ON dead_letters;
DROP FUNCTION dead_letter_search_update();
DROP FUNCTION dead_letter_search_delete();
DROP FUNCTION dead_letter_search_insert();
DROP FUNCTION dead_letter_search_text(text, jsonb, jsonb);
DROP TABLE dead_letter_search;
-- +goose StatementEnd
