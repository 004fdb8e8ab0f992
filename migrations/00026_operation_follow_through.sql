-- +goose NO TRANSACTION

-- Bulk replays followed to their outcome. An operation used to be "done"
-- once its letters were handed to the queue, while most of its replay jobs
-- had not run yet. Now a replay operation has two phases: enqueued (its
-- letters handed to the queue: state running, then settling) and settled
-- (every replay job succeeded, or died again as a new dead letter: done).
--
-- The links: a replayed letter names its job (dead_letters.replay_job_id,
-- and the job names the letter, jobs.replay_of); a replay that dies again
-- becomes a letter whose job_id is that job (unique) and whose replay_of is
-- the first letter. What was missing is the way from an operation to its
-- jobs that is cheap to count: jobs.operation_id, set when the batch
-- inserts the job, and a partial index on (operation_id, state).
--
-- An index rather than a maintained counter (a row of counts per
-- operation, moved by a trigger on jobs): a counter would make every
-- worker acknowledgement of a replay job update the one hot operations
-- row, serialising the workers on its row lock for a number the console
-- reads once a second. The index costs one entry per replay job state
-- change (a state change is never a HOT update anyway: state is in the
-- claim index's predicate), and counting 100,000 replays is one range of
-- an index-only scan (EXPLAIN in dlq/operation_replays.go). The runner
-- counts once a second per operation it follows and keeps the counts in
-- operations.replays, which is what the page, the API and the CLI read:
-- ten people polling cost one count, not ten.
--
-- Jobs enqueued before this migration have no operation_id: an operation
-- running across the upgrade counts only its later replays, and is done
-- once those settle. Backfilling would rewrite every replay job.
--
-- The new states: settling (enqueued, replays still running), canary_failed
-- (a canary replay died again: waits for release anyway or cancel),
-- auto_paused (the died-again guard stopped the releases). The guard's
-- setting and verdict, the canary's verdict and who stopped following are
-- columns of operations (a small table). The notification outbox learns
-- operation_auto_paused and operation_canary_failed, written by the same
-- trigger as the operation's end.
--
-- ADD COLUMN without a default only changes the catalogue; the brief lock
-- gives up after 5 s rather than queue the queue behind a long
-- transaction (rerun the migration). The index is built CONCURRENTLY, so
-- claims and acknowledgements go on meanwhile (hence NO TRANSACTION); a
-- build that failed half way leaves an invalid index, so it is dropped first.

-- +goose Up
BEGIN;
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS operation_id bigint;
ALTER TABLE operations
    ADD COLUMN IF NOT EXISTS died_again_percent real,
    ADD COLUMN IF NOT EXISTS guard_verdict text,
    ADD COLUMN IF NOT EXISTS canary_verdict text,
    ADD COLUMN IF NOT EXISTS enqueued_at timestamptz,
    ADD COLUMN IF NOT EXISTS stopped_following_by text,
    ADD COLUMN IF NOT EXISTS replays jsonb;
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_state_valid;
ALTER TABLE operations ADD CONSTRAINT operations_state_valid CHECK (state IN
    ('running', 'canary', 'canary_failed', 'auto_paused', 'settling', 'done', 'cancelled', 'failed'));
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_died_again_percent_valid;
ALTER TABLE operations ADD CONSTRAINT operations_died_again_percent_valid CHECK
    (died_again_percent IS NULL OR (died_again_percent > 0 AND died_again_percent < 100));
ALTER TABLE notification_events DROP CONSTRAINT notification_events_kind_valid;
ALTER TABLE notification_events ADD CONSTRAINT notification_events_kind_valid CHECK (kind IN
    ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled',
     'operation_auto_paused', 'operation_canary_failed', 'pause_began', 'pause_expired'));
DROP TRIGGER IF EXISTS operations_notify_ended ON operations;
CREATE TRIGGER operations_notify_ended AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
        AND NEW.state IN ('done', 'failed', 'cancelled', 'auto_paused', 'canary_failed'))
    EXECUTE FUNCTION notify_operation_ended();
COMMIT;

DROP INDEX CONCURRENTLY IF EXISTS jobs_operation_state_idx;
CREATE INDEX CONCURRENTLY jobs_operation_state_idx ON jobs (operation_id, state) WHERE operation_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_operation_state_idx;

BEGIN;
SET LOCAL lock_timeout = '5s';
DROP TRIGGER IF EXISTS operations_notify_ended ON operations;
-- The old states (before the trigger is back: these announce nothing).
UPDATE operations SET state = 'done', finished_at = coalesce(finished_at, now()) WHERE state = 'settling';
UPDATE operations SET state = 'canary' WHERE state = 'canary_failed';
UPDATE operations SET state = 'running' WHERE state = 'auto_paused';
CREATE TRIGGER operations_notify_ended AFTER UPDATE OF state ON operations
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('done', 'failed', 'cancelled'))
    EXECUTE FUNCTION notify_operation_ended();
DELETE FROM notification_events WHERE kind IN ('operation_auto_paused', 'operation_canary_failed');
ALTER TABLE notification_events DROP CONSTRAINT notification_events_kind_valid;
ALTER TABLE notification_events ADD CONSTRAINT notification_events_kind_valid CHECK (kind IN
    ('group_new', 'group_spike', 'operation_done', 'operation_failed', 'operation_cancelled',
     'pause_began', 'pause_expired'));
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_died_again_percent_valid;
ALTER TABLE operations DROP CONSTRAINT IF EXISTS operations_state_valid;
ALTER TABLE operations ADD CONSTRAINT operations_state_valid CHECK (state IN ('running', 'canary', 'done', 'cancelled', 'failed'));
ALTER TABLE operations
    DROP COLUMN IF EXISTS died_again_percent,
    DROP COLUMN IF EXISTS guard_verdict,
    DROP COLUMN IF EXISTS canary_verdict,
    DROP COLUMN IF EXISTS enqueued_at,
    DROP COLUMN IF EXISTS stopped_following_by,
    DROP COLUMN IF EXISTS replays;
ALTER TABLE jobs DROP COLUMN IF EXISTS operation_id;
COMMIT;
