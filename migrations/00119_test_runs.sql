-- Test runs: one job run from a dead letter's arguments (edited or not),
-- on a queue the operator chooses, to see whether a fix works before the
-- letter or its group is replayed. It is a trial, not a replay: the letter
-- stays pending, so the job is linked here rather than by jobs.replay_of,
-- which the operations, the died-again guard, the cleaner and the letter's
-- status read as "this letter's replay".

-- +goose Up

-- One row per test job, written in the transaction that enqueues it (with
-- its audit entry). job_id is the key: the worker's dead-letter write finds
-- a test job here by it (test_runs_settle_letters). No foreign keys, as
-- jobs.replay_of has none: a key check would lock the letter's row, which
-- a test run means not to touch, and a purge or the cleaner may delete the
-- letter or the job while the link keeps telling what was tried.
CREATE TABLE test_runs (
    job_id         bigint      PRIMARY KEY,
    dead_letter_id bigint      NOT NULL,
    requested_by   text        NOT NULL,
    requested_at   timestamptz NOT NULL DEFAULT now()
);
-- A letter's page lists its test runs, newest first.
CREATE INDEX test_runs_dead_letter_idx ON test_runs (dead_letter_id, job_id DESC);

-- A test job that dies is dead-lettered as every job is (the worker's
-- statement is the same), but its letter must not sit pending beside the
-- letter it tried: a group replay would run it a second time, and the
-- pending counts would grow with every trial. So, in the statement that
-- wrote it, the letter is settled as discarded with a reason naming the
-- letter it was a test of; the letter's page says so, and the letter tried
-- keeps its own status. This runs after dead_letters_summarise_insert (AFTER
-- triggers of one event fire in name order), which made the row pending:
-- the pending and outcome triggers then move it from pending to discarded
-- in the counts, as a discard does. The join is on test_runs' key, and
-- costs a batch of ordinary letters one probe each of an empty or small index.
-- +goose StatementBegin
CREATE FUNCTION test_runs_settle_letters() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH tried AS MATERIALIZED (
        SELECT n.id, n.failed_at, n.task, n.queue, t.dead_letter_id
        FROM new_rows n JOIN test_runs t ON t.job_id = n.job_id
    ), unpended AS (
        DELETE FROM pending_dead_letters p USING tried WHERE p.id = tried.id
    )
    INSERT INTO dead_letter_outcomes (dead_letter_id, failed_at, task, queue, discarded_at, discarded_by, discard_reason)
    SELECT id, failed_at, task, queue, now(), 'redrive', 'test run of dead letter ' || dead_letter_id || ', which stays pending'
    FROM tried;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER test_runs_settle_letters AFTER INSERT ON dead_letter_records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION test_runs_settle_letters();

-- +goose Down
DROP TRIGGER test_runs_settle_letters ON dead_letter_records;
DROP FUNCTION test_runs_settle_letters();
DROP TABLE test_runs;
