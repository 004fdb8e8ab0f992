-- The queue: jobs, the workers that run them, the tasks they can run, and
-- the pauses that hold some of them back.

-- +goose Up

-- The job table is the queue. A job moves through these states:
--
--   available ──claim──▶ running ──ok──────────────▶ succeeded
--       ▲                  │ │
--       │                  │ └─permanent / last attempt / lease expired on the last attempt─▶ dead
--       │                  ▼
--       └──run_at due── retrying   (transient failure, lease expired, or handed back at shutdown)
--
-- State is text with a CHECK rather than an enum so later states can be added
-- by a plain migration without ALTER TYPE's transaction restrictions.
--
-- An update that changes state is never HOT (state is indexed, and sits in
-- the partial indexes' predicates), so every claim and acknowledgement adds
-- an entry to each index whose predicate the new row version satisfies: the
-- indexes below are shaped so that a claim and an acknowledgement write as
-- few of them as possible.
CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text        NOT NULL DEFAULT 'default',
    task             text        NOT NULL,
    args             jsonb       NOT NULL DEFAULT '[]',
    kwargs           jsonb       NOT NULL DEFAULT '{}',
    -- The producer's own id for this piece of work. Enqueueing twice with the
    -- same key returns the first job: jobs_idempotency_key_idx makes it so.
    idempotency_key  text,
    state            text        NOT NULL DEFAULT 'available',
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 5,
    run_at           timestamptz NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    last_error       text,
    -- One JSON object per attempt: attempt, at, worker, host, version, class,
    -- message, traceback, outcome, retry_in_ms. Appended, never rewritten.
    errors           jsonb       NOT NULL DEFAULT '[]',
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempted_at     timestamptz,
    finished_at      timestamptz,
    -- The dead letter this job replays. No foreign key: checking one locks
    -- the letter's row (FOR KEY SHARE), a write to the very row a replay
    -- means not to touch. A purge clears the replay_of of the jobs of the
    -- letters it deletes instead (dlq/purge.go).
    replay_of        bigint,
    -- The job's own limit on one attempt, set at enqueue (timeout_seconds
    -- in the API, --timeout in `redrive enqueue`), instead of its task's
    -- timeout or the worker's default, and still under the worker's cap
    -- (--job-timeout). NULL: none of its own. Its range is checked at
    -- enqueue.
    timeout_ms       bigint,
    -- An operator's request to cancel the running attempt ({"attempt",
    -- "by", "reason", "retry", "at"}), which the worker holding the job
    -- reads at its next heartbeat when it did not hear the NOTIFY.
    cancel_requested jsonb,
    -- The bulk operation whose batch enqueued this replay: the way from an
    -- operation to its replays that is cheap to count
    -- (jobs_operation_state_idx).
    operation_id     bigint,

    CONSTRAINT jobs_state_valid CHECK (state IN ('available', 'retrying', 'running', 'succeeded', 'dead')),
    -- A length check and an unbounded class, not a bounded repetition
    -- ({1,200}): PostgreSQL's regex engine unrolls a bound into that many
    -- states, and matching one name that way cost ~30 us, more than the
    -- row and all its indexes together, on every enqueue, retry and replay.
    CONSTRAINT jobs_task_valid CHECK (length(task) BETWEEN 1 AND 200 AND task ~ '^[A-Za-z0-9_.:-]+$'),
    CONSTRAINT jobs_queue_valid CHECK (length(queue) BETWEEN 1 AND 100 AND queue ~ '^[A-Za-z0-9_.:-]+$'),
    CONSTRAINT jobs_args_array CHECK (jsonb_typeof(args) = 'array'),
    CONSTRAINT jobs_kwargs_object CHECK (jsonb_typeof(kwargs) = 'object'),
    CONSTRAINT jobs_max_attempts_valid CHECK (max_attempts BETWEEN 1 AND 100),
    CONSTRAINT jobs_attempt_valid CHECK (attempt >= 0),
    CONSTRAINT jobs_idempotency_key_valid CHECK (idempotency_key IS NULL OR length(idempotency_key) BETWEEN 1 AND 255),
    -- A running job always has a lease; nothing else has one.
    CONSTRAINT jobs_lease_consistent CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- Claiming: "the oldest due jobs of these queues". Partial, so the index holds
-- only waiting work and stays small however many finished jobs pile up.
CREATE INDEX jobs_claimable_idx ON jobs (queue, run_at, id) WHERE state IN ('available', 'retrying');
-- Lease rescue: "running jobs whose lease has expired". Small for the same
-- reason; the console reads the running jobs through it too.
CREATE INDEX jobs_running_lease_idx ON jobs (lease_expires_at) WHERE state = 'running';
-- Lineage: which jobs replayed a given dead letter.
CREATE INDEX jobs_replay_of_idx ON jobs (replay_of) WHERE replay_of IS NOT NULL;
-- Partial, rather than a UNIQUE constraint, so that the many jobs without
-- a key take no entry (NULLs never collide anyway). Enqueue's ON CONFLICT
-- names the predicate.
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- The console's job lists, newest first, keyset-paginated on id, by state
-- and queue, or by task ("show me billing.charge": with task first, a task
-- that is rare among millions of jobs is one index range, and task alone is
-- one range per state that the query merges). Both leave out the running
-- jobs, which are at most the workers' slots and read through
-- jobs_running_lease_idx, so that a claim writes no entry here; and the
-- succeeded jobs no letter links to, which jobs_succeeded_idx holds, so
-- that an acknowledgement writes the primary key and that one only.
-- Succeeded replays stay: a letter links to them, so the cleaner keeps
-- them, and in jobs_succeeded_idx they would sit in the cleaner's ranges
-- for ever.
CREATE INDEX jobs_state_queue_idx ON jobs (state, queue, id DESC)
    WHERE state <> 'running' AND (state <> 'succeeded' OR replay_of IS NOT NULL);
CREATE INDEX jobs_task_state_idx ON jobs (task, state, id DESC)
    WHERE state <> 'running' AND (state <> 'succeeded' OR replay_of IS NOT NULL);

-- The succeeded jobs no letter links to, for the console and the cleaner.
-- The console reads a queue's or a task's succeeded jobs newest first from
-- one range per (queue, task) pair (dlq/jobs_query.go finds the pairs by
-- skipping through the index); the cleaner walks the same ranges oldest
-- first, up to the first job created after its cutoff (dlq/cleaner.go),
-- reading finished_at from the index itself. EXPLAIN (ANALYZE, BUFFERS,
-- WAL) of one acknowledgement of 1,000 jobs among 200,000: with succeeded
-- jobs in the console's two indexes, 16,400 buffers, 6.0 WAL records and
-- 790 bytes a job, ~30 ms; with them here instead, 10,350 buffers, 4.0
-- records and 525 bytes, ~16 ms.
--
-- NULLS LAST, though id is never NULL, is so that only this index serves
-- the order the queries ask for (id DESC NULLS LAST, or ASC NULLS FIRST):
-- given ORDER BY id within a pair, the planner, not knowing how rare the
-- pair is, walked the primary key backwards and filtered every succeeded
-- job for a pair of 20 (TestSucceededJobListCostIsFlat).
CREATE INDEX jobs_succeeded_idx ON jobs (queue, task, id DESC NULLS LAST) INCLUDE (finished_at)
    WHERE state = 'succeeded' AND replay_of IS NULL;

-- A bulk replay's jobs by state: counting 100,000 replays is one range of
-- an index-only scan (EXPLAIN in dlq/operation_replays.go), which the
-- operation runner does once a second. An index rather than a counter row
-- per operation moved by a trigger on jobs: that counter would make every
-- worker acknowledgement of a replay update the one hot operations row,
-- serialising the workers on its lock. The index costs one entry per state
-- change of a replay job, which is never HOT anyway.
CREATE INDEX jobs_operation_state_idx ON jobs (operation_id, state) WHERE operation_id IS NOT NULL;

-- Exactly-once effect: a handler inserts its event's external id here in the
-- same transaction as its work; a redelivered duplicate hits the unique key.
CREATE TABLE processed_events (
    external_id text        PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- Live workers. Each process upserts its row at start, refreshes
-- heartbeat_at while it runs and deletes it on a clean stop; a row whose
-- heartbeat is old belongs to a process that died.
CREATE TABLE workers (
    id           text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    version      text        NOT NULL DEFAULT '',
    queues       text[]      NOT NULL,
    tasks        text[]      NOT NULL DEFAULT '{}',
    concurrency  integer     NOT NULL,
    in_flight    integer     NOT NULL DEFAULT 0,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- Every task a worker has ever registered, so that enqueue can refuse a
-- task nobody can run instead of leaving it waiting forever.
CREATE TABLE tasks (
    name          text        PRIMARY KEY,
    registered_at timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);

-- Pauses: an operator holds a queue or a task during an incident, with a
-- reason and perhaps an expiry. The claim (dlq/queue.go) skips what an
-- active pause holds; the held jobs stay as they are (available, retrying
-- or scheduled) with their attempts untouched, and run once it is resumed.
--
-- A pause is active while resumed_at IS NULL and until has not passed: an
-- expired pause holds nothing even before anyone marks it resumed (the
-- claim compares until with now()); whoever notices first (the console,
-- a worker) sets resumed_at and writes the audit entry, once, with a
-- guarded UPDATE.
CREATE TABLE pauses (
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
-- The claim's question, on every claim: what is paused now? At most one
-- pause per queue or task is open at a time, which is what makes a second
-- pause a conflict.
CREATE UNIQUE INDEX pauses_open_idx ON pauses (kind, name) WHERE resumed_at IS NULL;

-- Wake idle workers when work arrives. One notification per queue per
-- statement (not per row), so a batch insert of 10,000 jobs sends a handful.
-- +goose StatementBegin
CREATE FUNCTION redrive_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('redrive_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows) q;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION redrive_notify_jobs();

-- A job's arguments and attempts are compressed with lz4 rather than the
-- default pglz, where the server has it (Debian's, the PGDG packages and
-- the official images do; another keeps pglz): it does the same job
-- several times faster both ways, as the letters' columns measure (their
-- file says by how much).
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE jobs
            ALTER COLUMN errors SET COMPRESSION lz4,
            ALTER COLUMN args SET COMPRESSION lz4,
            ALTER COLUMN kwargs SET COMPRESSION lz4;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP TABLE pauses;
DROP TABLE tasks;
DROP TABLE workers;
DROP TABLE processed_events;
DROP TABLE jobs;
DROP FUNCTION redrive_notify_jobs();
