-- Notifications to webhooks: an outbox of events and one delivery row per
-- event and endpoint.
--
-- Events are written by triggers in the same transaction as what they
-- report (a new error group, an operation that ended), so none is lost and
-- none is announced that did not happen. The console's sender turns each
-- event into one delivery per configured endpoint, posts it, and retries
-- with backoff up to a cap; deliveries are at least once. A notification
-- never slows a worker: the worker's only part is the trigger's one-row
-- insert, and only when a group is new.
--
-- Endpoints live in the environment (REDRIVE_NOTIFY_WEBHOOK_URLS), not here:
-- an incoming-webhook URL is a secret. A delivery names its endpoint by a
-- hash of the URL and by a redacted form (scheme, host, the last characters)
-- for the admin page.

-- +goose Up
-- +goose StatementBegin
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
        ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled'))
);
CREATE INDEX notification_events_pending_idx ON notification_events (id) WHERE NOT fanned_out;

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
    PRIMARY KEY (event_id, endpoint_hash),
    CONSTRAINT notification_deliveries_state_valid CHECK (state IN ('pending', 'delivered', 'failed'))
);
CREATE INDEX notification_deliveries_due_idx ON notification_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX notification_deliveries_recent_idx ON notification_deliveries (updated_at DESC);

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
-- history, or a restored backup, announces nothing.
CREATE FUNCTION notify_group_new() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.first_seen > now() - interval '1 hour' THEN
        INSERT INTO notification_events (kind, subject, facts)
        VALUES ('group_new', NEW.fingerprint, jsonb_build_object('task', NEW.task, 'error_class', NEW.error_class));
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER error_groups_notify_new AFTER INSERT ON error_groups
    FOR EACH ROW EXECUTE FUNCTION notify_group_new();

CREATE FUNCTION notify_operation_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (kind, subject, facts)
    VALUES ('operation_' || NEW.state, NEW.id::text, jsonb_build_object('kind', NEW.kind, 'actor', NEW.actor));
    RETURN NULL;
END;
$$;
CREATE TRIGGER operations_notify_ended AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION notify_operation_ended();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER IF EXISTS operations_notify_ended ON operations;
DROP FUNCTION IF EXISTS notify_operation_ended();
DROP TRIGGER IF EXISTS error_groups_notify_new ON error_groups;
DROP FUNCTION IF EXISTS notify_group_new();
DROP TABLE IF EXISTS notification_spikes;
DROP TABLE IF EXISTS notification_sender;
DROP TABLE IF EXISTS notification_deliveries;
DROP TABLE IF EXISTS notification_events;
-- +goose StatementEnd
