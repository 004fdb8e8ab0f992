-- Periodic jobs: the schedules that workers register (a cron expression in
-- a timezone, or an interval), and the occurrences they enqueued.

-- +goose Up

-- One row per schedule, upserted by every worker that registers it when it
-- starts, so that the console (another process) can show it. The console
-- changes only enabled and the columns of its last change; the rest is the
-- code's, and the last worker to start wins.
--
-- next_run_at is the occurrence the fleet will enqueue next: every worker
-- computes it from the same definition, and the worker that enqueues an
-- occurrence moves it on in the same statement, guarded by
-- next_run_at <= the occurrence (store/queue/schedules.go). That guard,
-- with the job's idempotency key periodic:<name>:<occurrence>, is what makes
-- an occurrence run once however many workers race for it, with no leader.
-- A worker that starts finding it passed makes that one occurrence up.
CREATE TABLE schedules (
    name           text        PRIMARY KEY,
    -- Exactly one of cron (five or six fields, in timezone) and every_ms
    -- (real time, aligned to the Unix epoch so that all workers agree).
    cron           text,
    every_ms       bigint,
    timezone       text        NOT NULL DEFAULT 'UTC',
    task           text        NOT NULL,
    queue          text        NOT NULL,
    args           jsonb       NOT NULL DEFAULT '[]',
    kwargs         jsonb       NOT NULL DEFAULT '{}',
    max_attempts   integer     NOT NULL DEFAULT 5,
    next_run_at    timestamptz NOT NULL,
    -- A disabled schedule enqueues nothing; its workers still move
    -- next_run_at on, so enabling it again makes up nothing.
    enabled        boolean     NOT NULL DEFAULT true,
    -- Who last disabled or enabled it, when and why (also in the audit trail).
    changed_by     text,
    changed_at     timestamptz,
    change_reason  text,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    -- The last time a worker registered it or enqueued an occurrence
    -- (even of a disabled schedule): the page's hint, when the next run is
    -- long past, of when a worker last ran it.
    last_seen_at   timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT schedules_name_valid CHECK (length(name) BETWEEN 1 AND 200 AND name ~ '^[A-Za-z0-9_.:-]+$'),
    CONSTRAINT schedules_one_kind CHECK ((cron IS NULL) <> (every_ms IS NULL)),
    CONSTRAINT schedules_every_positive CHECK (every_ms IS NULL OR every_ms >= 1000),
    CONSTRAINT schedules_args_array CHECK (jsonb_typeof(args) = 'array'),
    CONSTRAINT schedules_kwargs_object CHECK (jsonb_typeof(kwargs) = 'object')
);

-- The occurrences each schedule enqueued, newest kept: the page's last run,
-- recent outcomes and dead letters join them to jobs and letters by job_id.
-- The primary key answers "the latest runs of this schedule" in one range.
-- No foreign key to jobs: the cleaner deletes succeeded jobs, and the run
-- then reads as succeeded-and-cleaned. The statement that enqueues an
-- occurrence also trims the schedule's runs to the newest 100, so the table
-- stays small however often a schedule fires.
CREATE TABLE schedule_runs (
    schedule       text        NOT NULL REFERENCES schedules (name) ON DELETE CASCADE,
    occurrence_at  timestamptz NOT NULL,
    job_id         bigint      NOT NULL,
    enqueued_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, occurrence_at)
);

-- +goose Down
DROP TABLE schedule_runs;
DROP TABLE schedules;
