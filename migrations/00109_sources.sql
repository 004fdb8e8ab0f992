-- Sources: where letters come from and where their replays go
-- (dlq.Source). Redrive's own queue is the source redrive; every other
-- source is configured by the operator (REDRIVE_SOURCES), never named by a
-- letter, and a row here keeps its state: what it brought in, and when.

-- +goose Up
CREATE TABLE sources (
    name           text        PRIMARY KEY,
    kind           text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    imported       bigint      NOT NULL DEFAULT 0,
    last_import_at timestamptz,
    CONSTRAINT sources_kind_valid CHECK (kind IN ('redrive', 'http'))
);
INSERT INTO sources (name, kind) VALUES ('redrive', 'redrive');

-- A letter from another source keeps its identity there in a narrow row of
-- its own, unique per source, so that the same failure sent twice is one
-- letter. Redrive's own letters have none (their job is the identity),
-- which leaves the dead-lettering path and a letter's row as they were. A
-- purged letter takes its row along.
CREATE TABLE letter_sources (
    dead_letter_id bigint PRIMARY KEY REFERENCES dead_letter_records (id) ON DELETE CASCADE,
    source         text   NOT NULL REFERENCES sources (name),
    external_id    text   NOT NULL,
    CONSTRAINT letter_sources_identity UNIQUE (source, external_id),
    CONSTRAINT letter_sources_external_id_len CHECK (length(external_id) BETWEEN 1 AND 200)
);

-- A token may be limited to sending the letters of some sources, and
-- nothing else (no read, no action): the credential a system that sends
-- its letters keeps. NULL is an ordinary token, of its user's role.
ALTER TABLE api_tokens ADD COLUMN sources text[];

-- +goose Down
ALTER TABLE api_tokens DROP COLUMN sources;
DROP TABLE letter_sources;
DROP TABLE sources;
