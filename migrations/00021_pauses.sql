-- Pauses: an operator holds a queue or a task during an incident, with a
-- reason and perhaps an expiry. The claim (dlq/queue.go) skips what an
-- active pause holds; the held jobs stay as they are (available, retrying
-- or scheduled) with their attempts untouched, and run once it is resumed.
--
-- A pause is active while resumed_at IS NULL and until has not passed: an
-- expired pause holds nothing even before anyone marks it resumed (the
-- claim compares until with now()); whoever notices first (the console,
-- a worker) sets resumed_at and writes the audit entry, once, with a
-- guarded UPDATE. At most one pause per queue or task is open at a time
-- (pauses_open_idx), which is what makes a second pause a conflict.
--
-- A new, small table: nothing here locks or rewrites jobs.

-- +goose Up
CREATE TABLE IF NOT EXISTS pauses (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind          text        NOT NULL,
    name          text        NOT NULL,
    reason        text        NOT NULL,
    paused_by     text        NOT NULL,
    paused_at     timestamptz NOT NULL DEFAULT now(),
    until         timestamptz,
    resumed_at    timestamptz,
    resumed_by    text,
    -- expired is true when the pause ended because until passed, not
    -- because someone resumed it.
    expired       boolean     NOT NULL DEFAULT false,

    CONSTRAINT pauses_kind_valid CHECK (kind IN ('queue', 'task')),
    CONSTRAINT pauses_reason_given CHECK (btrim(reason) <> ''),
    CONSTRAINT pauses_until_after_start CHECK (until IS NULL OR until > paused_at)
);
-- The claim's question, on every claim: what is paused now?
CREATE UNIQUE INDEX IF NOT EXISTS pauses_open_idx ON pauses (kind, name) WHERE resumed_at IS NULL;

-- +goose Down
DROP TABLE IF EXISTS pauses;
