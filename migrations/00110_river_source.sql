-- River as a source: Redrive imports the jobs River discarded, in the
-- order River finalised them, from a cursor kept here (River's own opaque
-- JobList cursor), and keeps what went wrong last so that the sources page
-- can say why a source is behind. What River knows of a letter that
-- Redrive's columns do not hold (its metadata, tags, priority) is kept
-- beside its identity.

-- +goose Up
ALTER TABLE sources DROP CONSTRAINT sources_kind_valid;
ALTER TABLE sources ADD CONSTRAINT sources_kind_valid CHECK (kind IN ('redrive', 'http', 'river'));
ALTER TABLE sources
    ADD COLUMN import_cursor text,
    ADD COLUMN checked_at    timestamptz,
    ADD COLUMN last_error    text,
    ADD COLUMN last_error_at timestamptz;
ALTER TABLE letter_sources ADD COLUMN details jsonb;

-- +goose Down
-- A River source's letters would pass for Redrive's own without it, and
-- be replayed as Redrive jobs: going back is refused while one exists.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sources WHERE kind = 'river') THEN
        RAISE EXCEPTION 'a River source is configured: purge its letters and delete it from sources before migrating down';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE letter_sources DROP COLUMN details;
ALTER TABLE sources
    DROP COLUMN import_cursor,
    DROP COLUMN checked_at,
    DROP COLUMN last_error,
    DROP COLUMN last_error_at;
ALTER TABLE sources DROP CONSTRAINT sources_kind_valid;
ALTER TABLE sources ADD CONSTRAINT sources_kind_valid CHECK (kind IN ('redrive', 'http'));
