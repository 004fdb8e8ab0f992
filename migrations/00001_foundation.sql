-- +goose Up
-- +goose StatementBegin

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
CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text        NOT NULL DEFAULT 'default',
    task             text        NOT NULL,
    args             jsonb       NOT NULL DEFAULT '[]',
    kwargs           jsonb       NOT NULL DEFAULT '{}',
    -- The producer's own id for this piece of work. Enqueueing twice with the
    -- same key returns the first job: the unique constraint is what makes it so.
    idempotency_key  text        UNIQUE,
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
    replay_of        bigint,

    CONSTRAINT jobs_state_valid CHECK (state IN ('available', 'retrying', 'running', 'succeeded', 'dead')),
    CONSTRAINT jobs_task_valid CHECK (task ~ '^[A-Za-z0-9_.:-]{1,200}$'),
    CONSTRAINT jobs_queue_valid CHECK (queue ~ '^[A-Za-z0-9_.:-]{1,100}$'),
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
-- Lease rescue: "running jobs whose lease has expired". Small for the same reason.
CREATE INDEX jobs_running_lease_idx ON jobs (lease_expires_at) WHERE state = 'running';
-- Console: jobs by state (and queue), newest first, keyset-paginated on (id).
CREATE INDEX jobs_state_queue_id_idx ON jobs (state, queue, id DESC);
-- Lineage: which jobs replayed a given dead letter.
CREATE INDEX jobs_replay_of_idx ON jobs (replay_of) WHERE replay_of IS NOT NULL;

-- A dead letter is a self-contained copy of a job that will not run again on
-- its own: everything needed to diagnose it (error, traceback, every attempt)
-- and to replay it (task, queue, args, kwargs). It does not reference jobs by
-- foreign key so that finished jobs can be pruned without losing letters.
CREATE TABLE dead_letters (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint      NOT NULL UNIQUE,
    queue            text        NOT NULL,
    task             text        NOT NULL,
    args             jsonb       NOT NULL,
    kwargs           jsonb       NOT NULL,
    idempotency_key  text,
    error_class      text        NOT NULL,
    error_message    text        NOT NULL,
    traceback        text        NOT NULL DEFAULT '',
    attempts         integer     NOT NULL,
    max_attempts     integer     NOT NULL,
    history          jsonb       NOT NULL DEFAULT '[]',
    reason           text        NOT NULL,
    -- Task + error class + message with ids, numbers and quoted values
    -- normalised away (dlq.Fingerprint): one bug, one fingerprint.
    fingerprint      text        NOT NULL,
    worker_version   text        NOT NULL DEFAULT '',
    enqueued_at      timestamptz NOT NULL,
    failed_at        timestamptz NOT NULL DEFAULT now(),
    replay_of        bigint      REFERENCES dead_letters (id) ON DELETE SET NULL,
    replayed_at      timestamptz,
    replayed_by      text,
    replay_job_id    bigint,
    discarded_at     timestamptz,
    discarded_by     text,
    discard_reason   text,
    -- Derived, stored and indexed: every console view filters on it.
    status           text GENERATED ALWAYS AS (
        CASE WHEN discarded_at IS NOT NULL THEN 'discarded'
             WHEN replayed_at  IS NOT NULL THEN 'replayed'
             ELSE 'pending' END) STORED,

    CONSTRAINT dead_letters_reason_valid CHECK (reason IN ('exhausted', 'permanent', 'lease_expired')),
    CONSTRAINT dead_letters_replay_consistent CHECK ((replayed_at IS NULL) = (replay_job_id IS NULL)),
    CONSTRAINT dead_letters_discard_has_reason CHECK (discarded_at IS NULL OR discard_reason IS NOT NULL)
);

-- The console lists letters newest first with keyset pagination on
-- (failed_at, id), usually narrowed by status and by one of task, queue or
-- fingerprint. One composite index per common narrowing keeps every first
-- page an index range scan, however many million rows the table holds.
CREATE INDEX dead_letters_failed_idx      ON dead_letters (failed_at DESC, id DESC);
CREATE INDEX dead_letters_status_idx      ON dead_letters (status, failed_at DESC, id DESC);
CREATE INDEX dead_letters_task_idx        ON dead_letters (task, failed_at DESC, id DESC);
CREATE INDEX dead_letters_queue_idx       ON dead_letters (queue, failed_at DESC, id DESC);
CREATE INDEX dead_letters_fingerprint_idx ON dead_letters (fingerprint, failed_at DESC, id DESC);
CREATE INDEX dead_letters_replay_of_idx   ON dead_letters (replay_of) WHERE replay_of IS NOT NULL;

-- Retention may delete old letters; a replay job then just loses its link.
ALTER TABLE jobs ADD CONSTRAINT jobs_replay_of_fkey FOREIGN KEY (replay_of) REFERENCES dead_letters (id) ON DELETE SET NULL;

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

-- Wake idle workers when work arrives. One notification per queue per
-- statement (not per row), so a batch insert of 10,000 jobs sends a handful.
CREATE FUNCTION redrive_notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('redrive_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows) q;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION redrive_notify_jobs();

-- Used by the demo task demo.apply_product_event to show a version-guarded
-- write: an event applies only when it is strictly newer than what is stored.
CREATE TABLE demo_products (
    id         text        PRIMARY KEY,
    version    bigint      NOT NULL,
    price      numeric     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE demo_products;
DROP TRIGGER jobs_notify_insert ON jobs;
DROP FUNCTION redrive_notify_jobs();
DROP TABLE tasks;
DROP TABLE workers;
DROP TABLE processed_events;
ALTER TABLE jobs DROP CONSTRAINT jobs_replay_of_fkey;
DROP TABLE dead_letters;
DROP TABLE jobs;
-- +goose StatementEnd
