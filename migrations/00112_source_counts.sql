-- Pending letters per source, kept as dead_letter_counts is: the overview
-- shows each source's pending letters on every refresh (every 5 s per
-- open page), and counting them means joining every letter of the source
-- to the pending ones. At 1,000,000 letters of which 100,000 came from two
-- sources, that join (the sources room's Sources before this) took 130-190
-- ms warm, a parallel worker and 20 MB of temporary files a call; reading
-- this table (SourcesPending) takes 0.15 ms.
--
-- Redrive's own letters are not counted here: they are every pending
-- letter no other source sent (dead_letter_counts less these), so the
-- worker's dead-lettering, its hot path, pays nothing for this table.

-- +goose Up
CREATE TABLE source_counts (
    source  text   PRIMARY KEY REFERENCES sources (name) ON DELETE CASCADE,
    pending bigint NOT NULL
);

-- A letter another source sends is written with its identity in
-- letter_sources, pending (the sources room's ingest, one statement per
-- batch): each identity written is one letter more pending in its source.
-- An identity is only ever deleted with its letter (a purge), and a purge
-- takes settled letters only, so deletes need no trigger here (and an
-- ON DELETE CASCADE fires a statement trigger once per deleted letter).
-- +goose StatementBegin
CREATE FUNCTION letter_sources_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO source_counts AS c (source, pending)
    SELECT source, count(*) FROM new_rows GROUP BY 1 ORDER BY 1
    ON CONFLICT (source) DO UPDATE SET pending = c.pending + EXCLUDED.pending;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- After that, a letter of another source stops or starts again being
-- pending as its pending row goes (replayed, discarded) or comes back
-- (restored, a replay its source refused). The rows the letters' insert
-- trigger writes (one trigger deeper) are new letters, counted above:
-- joining them here would cost every letter Redrive's worker writes a
-- lookup in letter_sources.
--
-- Deleting costs a replay or discard one lookup of letter_sources' key per
-- letter (the bulk replay already makes it, to leave other sources'
-- letters alone), and nothing while no source has a letter pending: none
-- of the deleted rows can then be another source's. The lookup is a
-- subquery per row, not a join: a join of the statement's rows to
-- letter_sources was planned as a hash join over the whole table (100,000
-- rows, 20-40 ms a batch, growing with the sources' letters). Measured
-- with auto_explain on a 1,000,000-letter database of which 100,000 came
-- from two sources, deleting 2,000 pending rows (a bulk batch): 2.0 ms and
-- 7,000 buffers when one in ten is another source's, 5.2 ms and 16,000
-- buffers when all are (a discard of one source's letters), against the
-- 73 ms of a whole discard batch (docs/performance.md).
--
-- The trigger's name sorts before pending_dead_letters_summarise_*, so it
-- runs first and locks source_counts before dead_letter_counts and
-- error_groups, in the order ingest locks them (its letter_sources insert
-- comes first): two writers cannot deadlock on the three. Rows are locked
-- in source order (ON CONFLICT in key order).
-- +goose StatementBegin
CREATE FUNCTION pending_dead_letters_count_sources() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF pg_trigger_depth() > 1 THEN
            RETURN NULL;
        END IF;
        INSERT INTO source_counts AS c (source, pending)
        SELECT source, count(*) FROM (
            SELECT (SELECT l.source FROM letter_sources l WHERE l.dead_letter_id = n.id) AS source FROM new_rows n
        ) x WHERE source IS NOT NULL GROUP BY 1 ORDER BY 1
        ON CONFLICT (source) DO UPDATE SET pending = c.pending + EXCLUDED.pending;
    ELSIF EXISTS (SELECT 1 FROM source_counts WHERE pending > 0) THEN
        INSERT INTO source_counts AS c (source, pending)
        SELECT source, -count(*) FROM (
            SELECT (SELECT l.source FROM letter_sources l WHERE l.dead_letter_id = o.id) AS source FROM old_rows o
        ) x WHERE source IS NOT NULL GROUP BY 1 ORDER BY 1
        ON CONFLICT (source) DO UPDATE SET pending = c.pending + EXCLUDED.pending;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- CREATE TRIGGER locks each table against writes until this migration
-- commits, so the counts below are exact when the triggers take over.
CREATE TRIGGER letter_sources_count AFTER INSERT ON letter_sources
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION letter_sources_count();
CREATE TRIGGER pending_dead_letters_count_sources_insert AFTER INSERT ON pending_dead_letters
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_count_sources();
CREATE TRIGGER pending_dead_letters_count_sources_delete AFTER DELETE ON pending_dead_letters
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_count_sources();

INSERT INTO source_counts (source, pending)
SELECT l.source, count(*) FROM letter_sources l JOIN pending_dead_letters p ON p.id = l.dead_letter_id
GROUP BY 1;

-- +goose Down
DROP TRIGGER pending_dead_letters_count_sources_delete ON pending_dead_letters;
DROP TRIGGER pending_dead_letters_count_sources_insert ON pending_dead_letters;
DROP TRIGGER letter_sources_count ON letter_sources;
DROP FUNCTION pending_dead_letters_count_sources();
DROP FUNCTION letter_sources_count();
DROP TABLE source_counts;
