-- The audit trail: who did what, when, why, to which letters.

-- +goose Up

-- Append-only (the trigger below refuses UPDATE, DELETE and TRUNCATE) and
-- hash-chained: each entry stores the previous entry's hash and a hash over
-- its own content and that previous hash, so `redrive audit verify` finds
-- the first entry that was altered or removed behind the database's back.
CREATE TABLE audit_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at             timestamptz NOT NULL,
    actor          text        NOT NULL,
    action         text        NOT NULL,
    dead_letter_id bigint,
    operation_id   bigint,
    filter         jsonb,
    max_id         bigint,
    counts         jsonb       NOT NULL DEFAULT '{}',
    reason         text        NOT NULL DEFAULT '',
    request_id     text        NOT NULL DEFAULT '',
    remote_addr    text        NOT NULL DEFAULT '',
    user_agent     text        NOT NULL DEFAULT '',
    details        jsonb       NOT NULL DEFAULT '{}',
    prev_hash      text        NOT NULL,
    hash           text        NOT NULL UNIQUE
);
CREATE INDEX audit_events_at_idx ON audit_events (at DESC, id DESC);
CREATE INDEX audit_events_actor_idx ON audit_events (actor, id DESC);
CREATE INDEX audit_events_action_idx ON audit_events (action, id DESC);
CREATE INDEX audit_events_dead_letter_idx ON audit_events (dead_letter_id) WHERE dead_letter_id IS NOT NULL;

-- Which letters an entry touched, for bulk operations (one row per letter,
-- written in the same transaction as the batch that changed it). Indexed by
-- letter, so each letter's detail page finds its own history.
--
-- No foreign key to audit_events: checked row by row, a bulk replay of
-- 100,000 letters made 100,000 lookups of the same entry, each taking a
-- FOR KEY SHARE lock on it (two lanes sharing it turn that lock into a
-- MultiXact): 17-21 ms of a batch's 125-220 ms (EXPLAIN (ANALYZE) of a
-- batch of 2,000 on a million seeded letters). It guarded nothing the
-- schema does not already: entries are append-only, so an entry never goes
-- away under its links, and the batch takes the id from its operation's
-- row, written in the transaction that wrote the entry.
CREATE TABLE audit_event_letters (
    dead_letter_id bigint NOT NULL,
    audit_event_id bigint NOT NULL,
    outcome        text   NOT NULL,
    PRIMARY KEY (dead_letter_id, audit_event_id)
);
CREATE INDEX audit_event_letters_event_idx ON audit_event_letters (audit_event_id, dead_letter_id);

-- +goose StatementBegin
CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_event_letters_append_only BEFORE UPDATE OR DELETE ON audit_event_letters
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_event_letters_no_truncate BEFORE TRUNCATE ON audit_event_letters
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();

-- +goose Down
DROP TABLE audit_event_letters;
DROP TABLE audit_events;
DROP FUNCTION audit_append_only();
