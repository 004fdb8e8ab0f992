-- Throttles: "slow down" instead of "stop". An operator limits a queue or
-- a task, with a reason and perhaps an expiry like a pause, to at most
-- max_running jobs running at once across all workers, and/or at most
-- max_per_second starts a second. The claim (store/queue/queue.go) honours
-- them: the main walk leaves a throttled queue or task out as it leaves a
-- paused one out, and a second walk takes each throttle's jobs, up to the
-- room redrive_throttle_room() finds for it.

-- +goose Up

-- A throttle is open while lifted_at IS NULL and until has not passed: an
-- expired throttle limits nothing even before anyone records it (the
-- claim compares until with now()); whoever notices first (the console, a
-- worker) sets lifted_at and writes the audit entry, once, with a guarded
-- UPDATE, as for pauses. A change rewrites the limits of the open row in
-- place (its audit entry keeps the limits before and after).
--
-- tokens and refilled_at are the start rate's token bucket: the bucket
-- holds at most max(1, max_per_second) tokens, gains max_per_second a
-- second since refilled_at, and each start takes one. The claim that
-- starts jobs updates them in its own statement, under the row's lock.
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
    tokens         double precision NOT NULL DEFAULT 0,
    refilled_at    timestamptz      NOT NULL DEFAULT now(),

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

-- redrive_throttle_room is the room each open throttle leaves this claim:
-- how many of its jobs may start now. The claim calls it only when a
-- throttle is open (an EXISTS over the small table above gates it).
--
-- It locks the open throttles it can (FOR UPDATE SKIP LOCKED) and holds
-- them until the claim commits, so two claims never count the same free
-- slot or token; a throttle another claim holds has no room for this one,
-- which then takes the rest of the work without waiting. It is VOLATILE
-- and in plpgsql because the count must come after the lock, in a snapshot
-- of its own: in READ COMMITTED each statement of a volatile function sees
-- what committed before it began, so the running jobs of the claim that
-- held the lock last are counted, which the claim statement's own snapshot,
-- taken before the lock, would miss.
--
-- Running jobs are counted through jobs_running_lease_idx (state =
-- 'running': at most the workers' slots, plus the entries of jobs finished
-- since the last vacuum), never the backlog; no index of its own, so a
-- claim with no throttle writes nothing more. A job whose worker died
-- holds its slot until the rescuer requeues it at its lease's end.
-- +goose StatementBegin
CREATE FUNCTION redrive_throttle_room() RETURNS TABLE (id bigint, kind text, name text, room bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    locked bigint[];
BEGIN
    SELECT coalesce(array_agg(l.id), '{}') INTO locked FROM (
        SELECT t.id FROM throttles t
        WHERE t.lifted_at IS NULL AND (t.until IS NULL OR t.until > now())
        FOR UPDATE SKIP LOCKED
    ) l;
    RETURN QUERY
    SELECT t.id, t.kind, t.name,
        CASE WHEN t.id <> ALL (locked) THEN 0 ELSE least(
            CASE WHEN t.max_running IS NULL THEN 2147483647
                ELSE greatest(0, t.max_running - (
                    SELECT count(*) FROM jobs j
                    WHERE j.state = 'running' AND t.kind = 'task' AND j.task = t.name
                ) - (
                    SELECT count(*) FROM jobs j
                    WHERE j.state = 'running' AND t.kind = 'queue' AND j.queue = t.name
                )) END,
            CASE WHEN t.max_per_second IS NULL THEN 2147483647
                ELSE floor(least(greatest(1, t.max_per_second),
                    t.tokens + t.max_per_second * greatest(0, extract(epoch FROM now() - t.refilled_at))))::bigint END
        ) END
    FROM throttles t
    WHERE t.lifted_at IS NULL AND (t.until IS NULL OR t.until > now());
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION redrive_throttle_room();
DROP TABLE throttles;
