-- Notifications to webhooks: an outbox of events and one delivery row per
-- event and endpoint.
--
-- Events are written by triggers in the same transaction as what they
-- report (a new error group, an operation that ended, a pause), so none is
-- lost and none is announced that did not happen. The console's sender
-- turns each event into one delivery per configured endpoint, posts it, and
-- retries with backoff up to a cap; deliveries are at least once. A
-- notification never slows a worker: the worker's only part is the
-- trigger's one-row insert, and only when a group is new.
--
-- Endpoints live in the environment (REDRIVE_NOTIFY_WEBHOOK_URLS), not here:
-- an incoming-webhook URL is a secret. A delivery names its endpoint by a
-- hash of the URL and by a redacted form (scheme, host, the last characters)
-- for the admin page.

-- +goose Up

CREATE TABLE notification_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text        NOT NULL,
    -- subject is what the event is about: a fingerprint, an operation id.
    subject     text        NOT NULL,
    facts       jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- fanned_out: the sender has made this event's deliveries.
    fanned_out  boolean     NOT NULL DEFAULT false,
    CONSTRAINT notification_events_kind_valid CHECK (kind IN
        ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled',
         'operation_auto_paused', 'operation_canary_failed', 'pause_began', 'pause_expired'))
);
CREATE INDEX notification_events_pending_idx ON notification_events (id) WHERE NOT fanned_out;

-- New error groups are announced in digests: at most one message per
-- webhook per window (REDRIVE_NOTIFY_NEW_GROUP_WINDOW), listing every group
-- found since the last, instead of one message per group: an outage that
-- makes 500 groups is one message, not 500. The sender seals an endpoint's
-- pending group_new deliveries into a digest: digest_id is set on each of
-- them, in one statement that also opens the endpoint's window. From then
-- on the digest's deliveries move together: one post, one statement
-- recording it on all of them. A delivery is sealed once (digest_id goes
-- from NULL to a value, never back), so a group is in one digest per
-- endpoint. A digest's id is its first (lowest) event id: no other message
-- to that endpoint carries it, since that event is announced nowhere else,
-- so a receiver deduplicating on the message's id still can.
--
-- 'skipped': a new group merged into another before it was announced is
-- settled without a message of its own.
CREATE TABLE notification_deliveries (
    event_id        bigint      NOT NULL REFERENCES notification_events (id) ON DELETE CASCADE,
    endpoint_hash   text        NOT NULL,
    endpoint        text        NOT NULL,
    state           text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    last_status     integer,
    delivered_at    timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    digest_id       bigint,
    PRIMARY KEY (event_id, endpoint_hash),
    CONSTRAINT notification_deliveries_state_valid CHECK (state IN ('pending', 'delivered', 'failed', 'skipped'))
);
CREATE INDEX notification_deliveries_due_idx ON notification_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notification_deliveries_recent_idx ON notification_deliveries (updated_at DESC);
-- The pending deliveries of one endpoint's digest, recorded together; and
-- the endpoint's unsealed ones, sealed together.
CREATE INDEX notification_deliveries_pending_digest_idx ON notification_deliveries (endpoint_hash, digest_id)
    WHERE state = 'pending';

-- Per endpoint, when its new-group window last opened: when a digest was
-- sealed for it, or later delivered. The next digest is sealed no sooner
-- than a window after. A row, not a max() over deliveries, so that sealing
-- checks and moves it in one step (ON CONFLICT ... WHERE), which two
-- senders cannot both pass.
CREATE TABLE notification_digest_windows (
    endpoint_hash text        PRIMARY KEY,
    opened_at     timestamptz NOT NULL
);

-- One sender at a time across console instances: whoever holds this row's
-- lease sends. A lease rather than an advisory lock, so that it works
-- through a transaction pooler and no transaction stays open while a
-- webhook answers.
CREATE TABLE notification_sender (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    holder      text        NOT NULL DEFAULT '',
    held_until  timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO notification_sender DEFAULT VALUES;

-- The last spike announced per group, so that a spike is announced once,
-- not at every check while it lasts.
CREATE TABLE notification_spikes (
    fingerprint text        PRIMARY KEY,
    notified_at timestamptz NOT NULL
);

-- A group is new when its first letter failed within the last hour: seeding
-- history, or a restored backup, announces nothing. A group announced as
-- new and merged away within the hour is no news: its letters are the
-- survivor's. Regrouping writes error_groups rows for groups it names,
-- which are not new failures either: it sets redrive.regrouping for its
-- transaction.
-- +goose StatementBegin
CREATE FUNCTION notify_group_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.first_seen > now() - interval '1 hour'
        AND coalesce(current_setting('redrive.regrouping', true), '') <> 'on'
        AND NOT EXISTS (SELECT 1 FROM error_group_merges WHERE from_id = NEW.fingerprint) THEN
        INSERT INTO notification_events (kind, subject, facts)
        VALUES ('group_new', NEW.fingerprint, jsonb_build_object('task', NEW.task, 'error_class', NEW.error_class));
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER error_groups_notify_new AFTER INSERT ON error_groups
    FOR EACH ROW EXECUTE FUNCTION notify_group_new();

-- An operation that ended, or that stopped to wait for a decision (the
-- follow-through of a bulk replay: auto_paused, canary_failed).
-- +goose StatementBegin
CREATE FUNCTION notify_operation_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (kind, subject, facts)
    VALUES ('operation_' || NEW.state, NEW.id::text, jsonb_build_object('kind', NEW.kind, 'actor', NEW.actor));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER operations_notify_ended AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
        AND NEW.state IN ('done', 'failed', 'cancelled', 'auto_paused', 'canary_failed'))
    EXECUTE FUNCTION notify_operation_ended();

-- A pause that began, and one that expired by itself, since a forgotten
-- expiry releases held work while nobody watches. A resume by hand is the
-- operator's own doing and announces nothing.
-- +goose StatementBegin
CREATE FUNCTION notify_pause() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (kind, subject, facts)
    VALUES (CASE WHEN TG_OP = 'INSERT' THEN 'pause_began' ELSE 'pause_expired' END, NEW.id::text,
            jsonb_build_object('kind', NEW.kind, 'name', NEW.name));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER pauses_notify_began AFTER INSERT ON pauses
    FOR EACH ROW EXECUTE FUNCTION notify_pause();
CREATE TRIGGER pauses_notify_expired AFTER UPDATE OF resumed_at ON pauses
    FOR EACH ROW WHEN (OLD.resumed_at IS NULL AND NEW.resumed_at IS NOT NULL AND NEW.expired)
    EXECUTE FUNCTION notify_pause();

-- +goose Down
DROP TRIGGER pauses_notify_expired ON pauses;
DROP TRIGGER pauses_notify_began ON pauses;
DROP TRIGGER operations_notify_ended ON operations;
DROP TRIGGER error_groups_notify_new ON error_groups;
DROP FUNCTION notify_pause();
DROP FUNCTION notify_operation_ended();
DROP FUNCTION notify_group_new();
DROP TABLE notification_spikes;
DROP TABLE notification_sender;
DROP TABLE notification_digest_windows;
DROP TABLE notification_deliveries;
DROP TABLE notification_events;
