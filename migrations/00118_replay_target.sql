-- Replay somewhere else, or later: a bulk replay may send its jobs to
-- another queue (a sandbox or debug queue where a fix is tried first),
-- start them from a given time (after a deploy lands), and give them a new
-- maximum number of attempts (dlq.ReplayTarget). The operation keeps what
-- it was asked, as it keeps its pace and canary, since its batches run
-- long after the request; NULL is the letter's own queue, now, and its own
-- attempts. A single replay needs no column: its job is written at once.

-- +goose Up
ALTER TABLE operations
    ADD COLUMN target_queue        text,
    ADD COLUMN start_at            timestamptz,
    ADD COLUMN target_max_attempts integer,
    ADD CONSTRAINT operations_target_max_attempts_valid CHECK
        (target_max_attempts IS NULL OR target_max_attempts BETWEEN 1 AND 100),
    ADD CONSTRAINT operations_target_only_replay CHECK
        (kind = 'replay' OR (target_queue IS NULL AND start_at IS NULL AND target_max_attempts IS NULL));

-- +goose Down
ALTER TABLE operations
    DROP CONSTRAINT operations_target_only_replay,
    DROP CONSTRAINT operations_target_max_attempts_valid,
    DROP COLUMN target_queue,
    DROP COLUMN start_at,
    DROP COLUMN target_max_attempts;
