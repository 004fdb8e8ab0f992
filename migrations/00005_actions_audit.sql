-- +goose Up
-- +goose StatementBegin

-- Bulk operations on dead letters. An operation is durable: its row holds
-- the bounded selection (explicit ids, or a filter plus the highest letter id
-- that matched when the engineer confirmed), its pace and its progress. The
-- runner handles letters in id order, batch by batch; each batch's changes
-- and the advance of cursor_id commit together, so after a crash the
-- operation resumes after cursor_id and never handles a letter twice.
CREATE TABLE operations (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text             NOT NULL,
    state           text             NOT NULL DEFAULT 'running',
    actor           text             NOT NULL,
    reason          text             NOT NULL DEFAULT '',
    ids             bigint[],
    filter          jsonb,
    max_id          bigint           NOT NULL,
    matched         bigint           NOT NULL,
    rate_per_second double precision,
    canary          integer          NOT NULL DEFAULT 0,
    cursor_id       bigint           NOT NULL DEFAULT 0,
    done_count      bigint           NOT NULL DEFAULT 0,
    skipped         bigint           NOT NULL DEFAULT 0,
    pace_origin     timestamptz,
    audit_event_id  bigint,
    error           text,
    created_at      timestamptz      NOT NULL DEFAULT now(),
    updated_at      timestamptz      NOT NULL DEFAULT now(),
    finished_at     timestamptz,

    CONSTRAINT operations_kind_valid CHECK (kind IN ('replay', 'discard')),
    CONSTRAINT operations_state_valid CHECK (state IN ('running', 'canary', 'done', 'cancelled', 'failed')),
    CONSTRAINT operations_selection CHECK ((ids IS NULL) <> (filter IS NULL)),
    CONSTRAINT operations_rate_valid CHECK (rate_per_second IS NULL OR rate_per_second > 0),
    CONSTRAINT operations_canary_valid CHECK (canary >= 0)
);
-- The runner's question: "which operations still have work?"
CREATE INDEX operations_active_idx ON operations (id) WHERE state = 'running';

-- One-time keys of submitted action forms and of the API's Idempotency-Key
-- header: a resubmitted form, a double click or a retry finds its key here
-- and gets the first result back instead of acting again.
CREATE TABLE action_keys (
    key        text        PRIMARY KEY,
    actor      text        NOT NULL,
    action     text        NOT NULL,
    status     integer     NOT NULL,
    result     jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The audit trail: who did what, when, why, to which letters. Append-only
-- (the trigger below refuses UPDATE, DELETE and TRUNCATE) and hash-chained:
-- each entry stores the previous entry's hash and a hash over its own
-- content and that previous hash, so `redrive audit verify` finds the first
-- entry that was altered or removed behind the database's back.
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
CREATE TABLE audit_event_letters (
    dead_letter_id bigint NOT NULL,
    audit_event_id bigint NOT NULL REFERENCES audit_events (id),
    outcome        text   NOT NULL,
    PRIMARY KEY (dead_letter_id, audit_event_id)
);
CREATE INDEX audit_event_letters_event_idx ON audit_event_letters (audit_event_id, dead_letter_id);

CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit trail is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_event_letters_append_only BEFORE UPDATE OR DELETE ON audit_event_letters
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
CREATE TRIGGER audit_event_letters_no_truncate BEFORE TRUNCATE ON audit_event_letters
    FOR EACH STATEMENT EXECUTE FUNCTION audit_append_only();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE audit_event_letters;
DROP TABLE audit_events;
DROP FUNCTION audit_append_only();
DROP TABLE action_keys;
DROP TABLE operations;
-- +goose StatementEnd
