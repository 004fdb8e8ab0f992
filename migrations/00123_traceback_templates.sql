-- Tracebacks stored once per shape: a letter keeps the values its
-- traceback holds, and the template it shares with the letters of the
-- same failure lives once, here (package store/tracepack).
--
-- The traceback was 672 of a seeded letter's 1,586 bytes (avg
-- pg_column_size over a million letters of `redrive seed`), and too short
-- for PostgreSQL to compress: a row is compressed only past about 2 kB,
-- whatever toast_tuple_target says. Yet the letters of one failure carry
-- the same frames: the million seeded letters hold 29,115 distinct
-- tracebacks in a 5% sample, and 152,653 once the message is taken out
-- (the rest differ by a request id in a chained cause). Cut into template
-- and values, a seeded letter keeps about 17 bytes of hash and a few dozen
-- of values; a copy of the table with tracebacks cut this way (the whole
-- traceback replaced by a 16-byte hash) took 932 MB against 1,612 MB.
--
-- The history (545 bytes a seeded letter now) is left as it is: leaving
-- out of each attempt the class and message the letter already says saved
-- under 1% of the table, as the long histories that repeat them most were
-- already compressed by PostgreSQL (rows past 2 kB), and the short ones
-- repeat little.

-- +goose Up

-- hash is the first 16 bytes of the template's SHA-256 (tracepack.Pack),
-- so a letter names its template without a lookup, and two writers of the
-- same new template insert the same key (ON CONFLICT DO NOTHING) rather
-- than racing for an id. Templates are never deleted: they are few (one per
-- failure and deploy), and a letter's row has no foreign key to its
-- template (a key check locks the referenced row, and every letter of a
-- burst would queue on its failure's one template). A purge leaves the
-- templates of the letters it removed.
CREATE TABLE traceback_templates (
    hash       bytea       PRIMARY KEY,
    template   text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT traceback_templates_hash_length CHECK (length(hash) = 16)
);

-- NULL: traceback holds the whole traceback (letters written before this
-- migration, a traceback tracepack stores whole, a lease that expired with
-- none). Otherwise traceback holds the letter's values, joined by \x01.
ALTER TABLE dead_letter_records ADD COLUMN traceback_template bytea;

-- A letter's traceback as it was written, for SQL that reads it (the
-- dead_letters view below). tracepack.Unpack in Go does the same for
-- readers of many letters (the regrouping), without a call per row.
CREATE FUNCTION dead_letter_traceback(template_hash bytea, traceback text, message text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN template_hash IS NULL THEN traceback ELSE coalesce((
    SELECT replace(string_agg(x.part || coalesce(x.value, ''), '' ORDER BY x.n), E'\x02', message)
    FROM traceback_templates t,
        unnest(string_to_array(t.template, E'\x01'), string_to_array(traceback, E'\x01')) WITH ORDINALITY AS x(part, value, n)
    WHERE t.hash = template_hash), '') END;

CREATE OR REPLACE VIEW dead_letters AS
SELECT r.id, r.job_id, r.queue, r.task, r.args, r.kwargs, r.idempotency_key, r.error_class,
    r.error_message, dead_letter_traceback(r.traceback_template, r.traceback, r.error_message) AS traceback,
    r.attempts, r.max_attempts, r.history, r.reason, r.fingerprint,
    r.worker_version, r.enqueued_at, r.failed_at, r.replay_of,
    o.replayed_at, o.replayed_by, o.replay_job_id, o.discarded_at, o.discarded_by, o.discard_reason,
    CASE WHEN o.discarded_at IS NOT NULL THEN 'discarded'
         WHEN o.replayed_at IS NOT NULL THEN 'replayed'
         ELSE 'pending' END AS status
FROM dead_letter_records r
LEFT JOIN dead_letter_outcomes o ON o.failed_at = r.failed_at AND o.dead_letter_id = r.id;

-- +goose Down
CREATE OR REPLACE VIEW dead_letters AS
SELECT r.id, r.job_id, r.queue, r.task, r.args, r.kwargs, r.idempotency_key, r.error_class,
    r.error_message, r.traceback, r.attempts, r.max_attempts, r.history, r.reason, r.fingerprint,
    r.worker_version, r.enqueued_at, r.failed_at, r.replay_of,
    o.replayed_at, o.replayed_by, o.replay_job_id, o.discarded_at, o.discarded_by, o.discard_reason,
    CASE WHEN o.discarded_at IS NOT NULL THEN 'discarded'
         WHEN o.replayed_at IS NOT NULL THEN 'replayed'
         ELSE 'pending' END AS status
FROM dead_letter_records r
LEFT JOIN dead_letter_outcomes o ON o.failed_at = r.failed_at AND o.dead_letter_id = r.id;
UPDATE dead_letter_records SET traceback = dead_letter_traceback(traceback_template, traceback, error_message), traceback_template = NULL
WHERE traceback_template IS NOT NULL;
DROP FUNCTION dead_letter_traceback(bytea, text, text);
ALTER TABLE dead_letter_records DROP COLUMN traceback_template;
DROP TABLE traceback_templates;
