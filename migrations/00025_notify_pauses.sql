-- Notifications of pauses (migration 00021): a pause that began, and one
-- that expired by itself, since a forgotten expiry releases held work
-- while nobody watches. A resume by hand is the operator's own doing and
-- announces nothing. The events are written by triggers in the same
-- transaction as the pause's change, as those of 00022.
--
-- notification_events is small (settled events are pruned after a week),
-- so swapping its CHECK constraint is quick.

-- +goose Up
-- +goose StatementBegin
SET LOCAL lock_timeout = '5s';
ALTER TABLE notification_events DROP CONSTRAINT notification_events_kind_valid;
ALTER TABLE notification_events ADD CONSTRAINT notification_events_kind_valid CHECK (kind IN
    ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled',
     'pause_began', 'pause_expired'));

CREATE FUNCTION notify_pause() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO notification_events (kind, subject, facts)
    VALUES (CASE WHEN TG_OP = 'INSERT' THEN 'pause_began' ELSE 'pause_expired' END, NEW.id::text,
            jsonb_build_object('kind', NEW.kind, 'name', NEW.name));
    RETURN NULL;
END;
$$;
CREATE TRIGGER pauses_notify_began AFTER INSERT ON pauses
    FOR EACH ROW EXECUTE FUNCTION notify_pause();
CREATE TRIGGER pauses_notify_expired AFTER UPDATE OF resumed_at ON pauses
    FOR EACH ROW WHEN (OLD.resumed_at IS NULL AND NEW.resumed_at IS NOT NULL AND NEW.expired)
    EXECUTE FUNCTION notify_pause();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
SET LOCAL lock_timeout = '5s';
DROP TRIGGER IF EXISTS pauses_notify_expired ON pauses;
DROP TRIGGER IF EXISTS pauses_notify_began ON pauses;
DROP FUNCTION IF EXISTS notify_pause();
DELETE FROM notification_events WHERE kind IN ('pause_began', 'pause_expired');
ALTER TABLE notification_events DROP CONSTRAINT notification_events_kind_valid;
ALTER TABLE notification_events ADD CONSTRAINT notification_events_kind_valid CHECK (kind IN
    ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled'));
-- +goose StatementEnd
