-- A letter's attempt history is stored as json, the text as written, not
-- jsonb.
--
-- The history is most of what a letter carries (1.6 KB of the seed's
-- 2.7 KB a letter) and nothing in the database looks inside it but the
-- detail page's cut of a long attempt traceback: it is written once and
-- read whole by Go. jsonb parses every value into its binary form on the
-- way in; json only checks that the text is JSON. perf of `redrive seed`:
-- jsonb_in was 15.7 % of the server's CPU, nearly all of it the history
-- (args and kwargs are 0.1 KB). Casting 200,000 seeded histories: 9.4 and
-- 11.7 s a million as jsonb, 3.4 and 5.3 s as json.
--
-- The worker still builds a job's attempts as jsonb (jobs.errors, which it
-- appends to on every retry); the letter's insert casts them to json by
-- the assignment cast, once per letter.
--
-- Changing the type rewrites dead_letter_records and rebuilds its
-- indexes under an exclusive lock: 42 s for a million letters here. The
-- worker's dead-lettering waits for it (and retries a write that times
-- out), and the console's pages wait too. The view over the letters is
-- rebuilt around the change, as written in 00033. A new type forgets the
-- column's compression, so the same statement sets lz4 again where the
-- server has it (00031), and the rewritten histories are stored with it.

-- +goose Up
DROP VIEW dead_letters;

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'ALTER TABLE dead_letter_records
        ALTER COLUMN history DROP DEFAULT,
        ALTER COLUMN history TYPE json USING history::json,
        ALTER COLUMN history SET DEFAULT ''[]'''
        || CASE WHEN EXISTS (SELECT 1 FROM pg_settings
                             WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))
           THEN ', ALTER COLUMN history SET COMPRESSION lz4' ELSE '' END;
END
$$;
-- +goose StatementEnd

CREATE VIEW dead_letters AS
SELECT r.id, r.job_id, r.queue, r.task, r.args, r.kwargs, r.idempotency_key, r.error_class,
    r.error_message, r.traceback, r.attempts, r.max_attempts, r.history, r.reason, r.fingerprint,
    r.worker_version, r.enqueued_at, r.failed_at, r.replay_of,
    o.replayed_at, o.replayed_by, o.replay_job_id, o.discarded_at, o.discarded_by, o.discard_reason,
    CASE WHEN o.discarded_at IS NOT NULL THEN 'discarded'
         WHEN o.replayed_at IS NOT NULL THEN 'replayed'
         ELSE 'pending' END AS status
FROM dead_letter_records r
LEFT JOIN dead_letter_outcomes o ON o.failed_at = r.failed_at AND o.dead_letter_id = r.id;

-- +goose Down
DROP VIEW dead_letters;

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE 'ALTER TABLE dead_letter_records
        ALTER COLUMN history DROP DEFAULT,
        ALTER COLUMN history TYPE jsonb USING history::jsonb,
        ALTER COLUMN history SET DEFAULT ''[]'''
        || CASE WHEN EXISTS (SELECT 1 FROM pg_settings
                             WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals))
           THEN ', ALTER COLUMN history SET COMPRESSION lz4' ELSE '' END;
END
$$;
-- +goose StatementEnd

CREATE VIEW dead_letters AS
SELECT r.id, r.job_id, r.queue, r.task, r.args, r.kwargs, r.idempotency_key, r.error_class,
    r.error_message, r.traceback, r.attempts, r.max_attempts, r.history, r.reason, r.fingerprint,
    r.worker_version, r.enqueued_at, r.failed_at, r.replay_of,
    o.replayed_at, o.replayed_by, o.replay_job_id, o.discarded_at, o.discarded_by, o.discard_reason,
    CASE WHEN o.discarded_at IS NOT NULL THEN 'discarded'
         WHEN o.replayed_at IS NOT NULL THEN 'replayed'
         ELSE 'pending' END AS status
FROM dead_letter_records r
LEFT JOIN dead_letter_outcomes o ON o.failed_at = r.failed_at AND o.dead_letter_id = r.id;
