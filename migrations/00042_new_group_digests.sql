-- New error groups are announced in digests: at most one message per
-- webhook per window (REDRIVE_NOTIFY_NEW_GROUP_WINDOW), listing every group
-- found since the last, instead of one message per group. An outage that
-- makes 500 groups is one message, not 500.
--
-- The outbox (00022) is unchanged: the trigger still writes one group_new
-- event per new group, and the sender still makes one delivery per event
-- and endpoint. What is new is that the sender seals an endpoint's pending
-- group_new deliveries into a digest: digest_id is set on each of them, in
-- one statement that also opens the endpoint's window. From then on the
-- digest's deliveries move together: one post, one statement recording it
-- on all of them. A delivery is sealed once (digest_id goes from NULL to a
-- value, never back), so a group is in one digest per endpoint.
--
-- A digest's id is its first (lowest) event id: no other message to that
-- endpoint carries it, since that event is announced nowhere else, so a
-- receiver deduplicating on the message's id still can.
--
-- 'skipped': a new group merged into another before it was announced is
-- settled without a message of its own.
--
-- notification_deliveries is small (settled events are pruned after a
-- week), so the new column, the index and the swapped CHECK are quick.

-- +goose Up
-- +goose StatementBegin
SET LOCAL lock_timeout = '5s';
ALTER TABLE notification_deliveries ADD COLUMN digest_id bigint;
ALTER TABLE notification_deliveries DROP CONSTRAINT notification_deliveries_state_valid;
ALTER TABLE notification_deliveries ADD CONSTRAINT notification_deliveries_state_valid
    CHECK (state IN ('pending', 'delivered', 'failed', 'skipped'));
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
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
SET LOCAL lock_timeout = '5s';
DROP TABLE IF EXISTS notification_digest_windows;
DROP INDEX IF EXISTS notification_deliveries_pending_digest_idx;
-- A skipped delivery was not sent: failed is the older schema's nearest.
UPDATE notification_deliveries SET state = 'failed' WHERE state = 'skipped';
ALTER TABLE notification_deliveries DROP CONSTRAINT notification_deliveries_state_valid;
ALTER TABLE notification_deliveries ADD CONSTRAINT notification_deliveries_state_valid
    CHECK (state IN ('pending', 'delivered', 'failed'));
ALTER TABLE notification_deliveries DROP COLUMN IF EXISTS digest_id;
-- +goose StatementEnd
