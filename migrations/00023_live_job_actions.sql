-- +goose NO TRANSACTION

-- Acting on live jobs (issue 14): an operator may kill a waiting job
-- straight to the dead letters, or cancel a running one.
--
-- 1. Two new dead-letter reasons, 'killed' and 'cancelled'. The check is
--    swapped NOT VALID, then validated: the swap itself is instant (new
--    rows are checked from the moment it commits) and VALIDATE takes a
--    SHARE UPDATE EXCLUSIVE lock, under which dead-lettering goes on. The
--    new check only widens the old one, so every row passes it.
--
-- 2. jobs.cancel_requested: an operator's request to cancel a running
--    job's current attempt ({"attempt", "by", "reason", "retry", "at"}),
--    which the worker holding it reads at its next heartbeat when it did
--    not hear the NOTIFY. A nullable column without a default changes only
--    the catalogue; the brief ACCESS EXCLUSIVE lock gives up after 5 s
--    rather than queue claims behind a long transaction (rerun the
--    migration).

-- +goose Up
BEGIN;
SET LOCAL lock_timeout = '5s';
ALTER TABLE dead_letters
    DROP CONSTRAINT IF EXISTS dead_letters_reason_valid,
    ADD CONSTRAINT dead_letters_reason_valid
        CHECK (reason IN ('exhausted', 'permanent', 'lease_expired', 'killed', 'cancelled')) NOT VALID;
COMMIT;
ALTER TABLE dead_letters VALIDATE CONSTRAINT dead_letters_reason_valid;

BEGIN;
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancel_requested jsonb;
COMMIT;

-- +goose Down
BEGIN;
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs DROP COLUMN IF EXISTS cancel_requested;
COMMIT;

-- Letters killed or cancelled stay as they are: the narrower check goes
-- back NOT VALID, and is validated only when no such letter exists, so
-- going down loses no letter and never fails on one.
BEGIN;
SET LOCAL lock_timeout = '5s';
ALTER TABLE dead_letters
    DROP CONSTRAINT IF EXISTS dead_letters_reason_valid,
    ADD CONSTRAINT dead_letters_reason_valid
        CHECK (reason IN ('exhausted', 'permanent', 'lease_expired')) NOT VALID;
COMMIT;
-- +goose StatementBegin
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM dead_letters WHERE reason IN ('killed', 'cancelled')) THEN
        ALTER TABLE dead_letters VALIDATE CONSTRAINT dead_letters_reason_valid;
    END IF;
END
$$;
-- +goose StatementEnd
