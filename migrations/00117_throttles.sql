-- Throttles: "slow down" instead of "stop". An operator limits a queue or
-- a task, with a reason and perhaps an expiry like a pause, to at most
-- max_running jobs running at once across all workers, and/or at most
-- max_per_second starts a second. Each worker process leases a share of
-- each open throttle (throttle_grants, below) and keeps within it on its
-- own; the claim (store/queue/queue.go) takes, for each throttle, at most
-- the room the worker passes it, and nothing of a throttle the worker
-- holds no grant of at its current revision.

-- +goose Up

-- A throttle is open while lifted_at IS NULL and until has not passed: an
-- expired throttle limits nothing even before anyone records it (the
-- claim compares until with now()); whoever notices first (the console, a
-- worker) sets lifted_at and writes the audit entry, once, with a guarded
-- UPDATE, as for pauses. A change rewrites the limits of the open row in
-- place (its audit entry keeps the limits before and after).
--
-- revision counts the changes: a grant names the revision it was made
-- for, and the claim honours a grant only at its throttle's revision, so
-- that a change binds the next claim, not the next renewal.
CREATE TABLE throttles (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind           text             NOT NULL,
    name           text             NOT NULL,
    max_running    integer,
    max_per_second double precision,
    reason         text             NOT NULL,
    set_by         text             NOT NULL,
    set_at         timestamptz      NOT NULL DEFAULT now(),
    until          timestamptz,
    changed_by     text,
    changed_at     timestamptz,
    lifted_at      timestamptz,
    lifted_by      text,
    -- expired is true when the throttle ended because until passed, not
    -- because someone lifted it.
    expired        boolean          NOT NULL DEFAULT false,
    revision       bigint           NOT NULL DEFAULT 1,

    CONSTRAINT throttles_kind_valid CHECK (kind IN ('queue', 'task')),
    CONSTRAINT throttles_reason_given CHECK (btrim(reason) <> ''),
    CONSTRAINT throttles_limit_given CHECK (max_running IS NOT NULL OR max_per_second IS NOT NULL),
    CONSTRAINT throttles_max_running_valid CHECK (max_running IS NULL OR max_running BETWEEN 1 AND 100000),
    CONSTRAINT throttles_max_per_second_valid CHECK (max_per_second IS NULL OR (max_per_second >= 0.01 AND max_per_second <= 100000)),
    CONSTRAINT throttles_until_after_start CHECK (until IS NULL OR until > set_at)
);
-- The claim's question, on every claim: is anything throttled now? At most
-- one throttle per queue or task is open at a time, which is what makes a
-- second one a conflict (change the open one instead).
CREATE UNIQUE INDEX throttles_open_idx ON throttles (kind, name) WHERE lifted_at IS NULL;

-- A grant is one worker process's share of an open throttle: at most
-- slots of its jobs running in that process, and per_second starts a
-- second from a token bucket of its own, until expires_at. worker is the
-- id in workers.id and jobs.lease_owner. A worker renews its grants about
-- once a second while it claims, each renewal for a few seconds; it
-- stops using a grant a margin before expires_at by its own clock, so a
-- grant the table calls expired is used by nobody.
--
-- Grants are written only under their throttle row's lock (FOR UPDATE,
-- waiting; store/queue/grants.go), which makes the shares exact: for each
-- throttle, the sum over live grants of the current revision of
-- greatest(slots, that worker's running jobs), plus the running jobs of
-- every other worker, never exceeds max_running, and the live per_second
-- shares never exceed max_per_second. A worker with no live grant (dead,
-- gone, or granted before a change) holds only what it runs, counted as
-- such until its jobs finish or are rescued. Shares are fair among the
-- workers with a live grant, rebalanced as each renews.
CREATE TABLE throttle_grants (
    throttle_id bigint           NOT NULL REFERENCES throttles (id) ON DELETE CASCADE,
    worker      text             NOT NULL,
    revision    bigint           NOT NULL,
    slots       integer,
    per_second  double precision,
    expires_at  timestamptz      NOT NULL,
    PRIMARY KEY (throttle_id, worker)
);

-- +goose Down
DROP TABLE throttle_grants;
DROP TABLE throttles;
