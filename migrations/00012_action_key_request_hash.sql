-- An action key (a form's one-time key, the API's Idempotency-Key) was
-- bound only to its actor and action: discarding letter 7 with key K and
-- then letter 8 with the same key answered "discarded" for 8 while 8 was
-- still pending. request_hash is a digest of what the first request asked
-- for (its action, target and body, dlq.requestHash); a later request with
-- the same key but another digest is refused (422) instead of being given
-- the first answer. Keys stored before this migration have no digest and
-- keep the old check (same actor, same action).
--
-- A nullable column without a default is a change to the catalogue only:
-- no rewrite, and the lock it takes on action_keys lasts as long as that,
-- so this one runs in goose's transaction. SET LOCAL lock_timeout makes a
-- migration stuck behind a long action fail quickly (rerun it: IF NOT
-- EXISTS) rather than queue every new action behind it.

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE action_keys ADD COLUMN IF NOT EXISTS request_hash text;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE action_keys DROP COLUMN IF EXISTS request_hash;
