-- A bulk operation by filter now walks its letters the way the list pages
-- do: newest first on (failed_at, id), through whichever index matches the
-- filter, instead of in id order through the primary key with the filter
-- applied to every row on the way (which, for "failed since T" on a million
-- letters, read ten rows for each one it kept, and far more for a narrow
-- filter). The position is then a pair; cursor_id keeps the id half, and
-- this column the failed_at half. NULL: the operation has not started, or
-- it was started by an earlier version that walked by id alone; both start
-- again from the newest letter, which is safe because a batch only ever
-- takes pending letters (a letter already handled is never seen again).
--
-- A nullable column without a default changes only the catalogue. The
-- brief ACCESS EXCLUSIVE lock gives up after 5 s rather than queue the
-- console behind a long transaction (rerun the migration).

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations ADD COLUMN IF NOT EXISTS cursor_failed_at timestamptz;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations DROP COLUMN IF EXISTS cursor_failed_at;
