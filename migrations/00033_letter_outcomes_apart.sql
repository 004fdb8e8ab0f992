-- A letter's facts are written once; what happens to it later lives apart.
--
-- Replaying or discarding a letter used to update its row in dead_letters:
-- a new version of the whole row (1.6 KB on average, tracebacks and
-- attempt history included), never a HOT update (status, which the
-- outcome changes, is in the predicate of the pending letters' partial
-- indexes), so seven index entries, and a full-page image of the old
-- row's page after every checkpoint. EXPLAIN (ANALYZE, BUFFERS, WAL) of one
-- bulk discard batch of 2,000 among 1,000,000 seeded letters, right after
-- a CHECKPOINT: 198 ms, 18,478 WAL records, 1,003 full-page images and
-- 11.9 MB of WAL, 154 ms of it the letters' UPDATE. The same batch on the
-- layout below: 42 ms, 1.4 MB of WAL.
--
-- 1. dead_letter_records holds the facts of each letter (what failed, how,
--    with what), inserted once and never updated by an action.
-- 2. pending_dead_letters holds one narrow row per pending letter, with
--    the columns the pending views filter and sort on, and the indexes by
--    time and by reason that were partial on status = 'pending'; a
--    pending view by task, queue, error class or error group walks the
--    letters' own index on that column and probes this table's key. Replaying or discarding a
--    letter deletes its row (no index entry written); the DELETE is also
--    the guard: of two actions racing for a letter, only the one whose
--    DELETE removed the row goes on. Restoring a discarded letter inserts
--    the row again.
-- 3. dead_letter_outcomes holds one narrow row per replayed or discarded
--    letter: who, when, why, which replay job. Its key is
--    (failed_at, dead_letter_id), not the letter's id alone, so that a bulk
--    action, which walks letters in failed_at order, writes its keys into
--    a few adjacent index pages rather than one random page (and one
--    full-page image) per letter: with the id alone as the key, the same
--    batch wrote 1,024 full-page images and 8.7 MB of WAL.
-- 4. dead_letters becomes a view of the three with the columns it always
--    had, so that every read of a letter stays as it was. A read that
--    names no outcome column costs no join (Postgres removes the LEFT JOIN
--    on a unique key). The pending views read pending_dead_letters
--    (letterSource in dlq/dead_letters_query.go).
--
-- Neither new table has a foreign key to dead_letter_records, and jobs
-- loses its own (jobs_replay_of_fkey): checking a foreign key locks the
-- referenced row (FOR KEY SHARE), which writes to the letter's wide row
-- and its page, the very write this layout takes away. The store keeps
-- them consistent instead: a letter's rows go with it (the delete trigger
-- below), and a purge clears the replay_of of the jobs of the letters it
-- deletes, as the foreign key's ON DELETE SET NULL did.
--
-- The summaries follow the rows: pending counts (dead_letter_counts'
-- pending rows, error_groups.pending) move with pending_dead_letters (a new
-- letter's are counted with it),
-- replayed and discarded counts with dead_letter_outcomes, totals and
-- inflow with dead_letter_records. Each trigger is per statement, so a
-- batch updates each summary row once.

-- +goose Up
ALTER TABLE dead_letters RENAME TO dead_letter_records;

CREATE TABLE pending_dead_letters (
    id          bigint      PRIMARY KEY,
    failed_at   timestamptz NOT NULL,
    task        text        NOT NULL,
    queue       text        NOT NULL,
    reason      text        NOT NULL,
    error_class text        NOT NULL,
    fingerprint text        NOT NULL
);

CREATE TABLE dead_letter_outcomes (
    failed_at      timestamptz NOT NULL,
    dead_letter_id bigint      NOT NULL,
    task           text        NOT NULL,
    queue          text        NOT NULL,
    replayed_at    timestamptz,
    replayed_by    text,
    replay_job_id  bigint,
    discarded_at   timestamptz,
    discarded_by   text,
    discard_reason text,
    PRIMARY KEY (failed_at, dead_letter_id),
    CONSTRAINT dead_letter_outcomes_one CHECK ((replayed_at IS NULL) <> (discarded_at IS NULL)),
    CONSTRAINT dead_letter_outcomes_replay_consistent CHECK ((replayed_at IS NULL) = (replay_job_id IS NULL)),
    CONSTRAINT dead_letter_outcomes_discard_has_reason CHECK (discarded_at IS NULL OR discard_reason IS NOT NULL)
);

INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
SELECT id, failed_at, task, queue, reason, error_class, fingerprint
FROM dead_letter_records WHERE status = 'pending' ORDER BY failed_at, id;

INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, replayed_at, replayed_by,
    replay_job_id, discarded_at, discarded_by, discard_reason)
SELECT failed_at, id, task, queue,
    CASE WHEN discarded_at IS NULL THEN replayed_at END, CASE WHEN discarded_at IS NULL THEN replayed_by END,
    CASE WHEN discarded_at IS NULL THEN replay_job_id END, discarded_at, discarded_by, discard_reason
FROM dead_letter_records WHERE status <> 'pending' ORDER BY failed_at, id;

CREATE INDEX pending_dead_letters_failed_idx      ON pending_dead_letters (failed_at DESC, id DESC);
CREATE INDEX pending_dead_letters_reason_idx      ON pending_dead_letters (reason, failed_at DESC, id DESC);
-- By task, queue, error class or error group, the pending views read the
-- letters' own index on the column and look up each letter's pending row
-- (dlq's Filter.source): an index of those here too would make every new
-- letter write more index entries than it did before the split.
-- The purge's walk: settled letters, oldest outcome first. An action
-- appends at its end (now()), so it costs a bulk action one adjacent entry.
CREATE INDEX dead_letter_outcomes_settled_idx ON dead_letter_outcomes ((coalesce(discarded_at, replayed_at)));

ALTER TABLE jobs DROP CONSTRAINT jobs_replay_of_fkey;

DROP TRIGGER dead_letters_summarise_update ON dead_letter_records;
DROP TRIGGER dead_letters_summarise_insert ON dead_letter_records;
DROP TRIGGER dead_letters_summarise_delete ON dead_letter_records;
DROP FUNCTION dead_letters_summarise_update();

-- Dropping the columns drops the partial indexes on status with them.
ALTER TABLE dead_letter_records
    DROP CONSTRAINT dead_letters_discard_has_reason,
    DROP CONSTRAINT dead_letters_replay_consistent,
    DROP COLUMN status,
    DROP COLUMN replayed_at, DROP COLUMN replayed_by, DROP COLUMN replay_job_id,
    DROP COLUMN discarded_at, DROP COLUMN discarded_by, DROP COLUMN discard_reason;

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

-- +goose StatementBegin
-- A new letter is pending: its pending row is written here, so that every
-- writer of letters (the worker, the rescuer, the seed's COPY) gets it, and
-- counted here with the letter, in one upsert of each summary row: the
-- pending rows' own trigger leaves the rows this trigger writes to it
-- (counting them there would update each error group's row a second time
-- in every dead-lettering statement, a row that concurrent writers of the
-- same failure wait for).
CREATE OR REPLACE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_counts AS c (task, queue, status, n)
    SELECT task, queue, 'pending', count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;

    INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
    SELECT fingerprint, min(task), min(error_class),
           (array_agg(error_message ORDER BY failed_at DESC))[1],
           count(*), count(*), min(failed_at), max(failed_at)
    FROM new_rows GROUP BY fingerprint ORDER BY fingerprint
    ON CONFLICT (fingerprint) DO UPDATE SET
        total = g.total + EXCLUDED.total,
        pending = g.pending + EXCLUDED.pending,
        first_seen = least(g.first_seen, EXCLUDED.first_seen),
        last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
        sample_message = CASE WHEN EXCLUDED.last_seen >= g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END;

    INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
    SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;

    INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A letter deleted (a purge) takes its pending or outcome row with it;
-- their own triggers then take it out of the counts.
CREATE OR REPLACE FUNCTION dead_letters_summarise_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pending_dead_letters p USING old_rows o WHERE p.id = o.id;
    DELETE FROM dead_letter_outcomes d USING old_rows o
    WHERE d.failed_at = o.failed_at AND d.dead_letter_id = o.id;

    UPDATE error_groups g SET total = g.total - x.n
    FROM (SELECT fingerprint, count(*) AS n FROM old_rows GROUP BY 1) x
    WHERE g.fingerprint = x.fingerprint;
    DELETE FROM error_groups g USING (SELECT DISTINCT fingerprint FROM old_rows) x
    WHERE g.fingerprint = x.fingerprint AND g.total <= 0;
    -- What is left of each touched group: its oldest and newest letters
    -- and the newest message, each one step along the index.
    UPDATE error_groups g SET
        first_seen = (SELECT d.failed_at FROM dead_letter_records d WHERE d.fingerprint = g.fingerprint
                      ORDER BY d.failed_at, d.id LIMIT 1),
        last_seen = n.failed_at,
        sample_message = n.error_message
    FROM (SELECT DISTINCT fingerprint FROM old_rows) x
    CROSS JOIN LATERAL (SELECT d.failed_at, d.error_message FROM dead_letter_records d
                        WHERE d.fingerprint = x.fingerprint
                        ORDER BY d.failed_at DESC, d.id DESC LIMIT 1) n
    WHERE g.fingerprint = x.fingerprint;

    UPDATE dead_letter_inflow i SET n = i.n - x.n
    FROM (SELECT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue, count(*) AS n
          FROM old_rows GROUP BY 1, 2, 3) x
    WHERE i.fingerprint = x.fingerprint AND i.hour = x.hour AND i.queue = x.queue;
    DELETE FROM dead_letter_inflow i
    USING (SELECT DISTINCT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue FROM old_rows) x
    WHERE i.fingerprint = x.fingerprint AND i.hour = x.hour AND i.queue = x.queue AND i.n <= 0;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Pending counts, by task and queue and by error group, move with the
-- pending rows: a replay or discard deletes them, a restore inserts one
-- again. The rows the letters' insert trigger writes (one trigger deeper)
-- are counted there.
CREATE FUNCTION pending_dead_letters_summarise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND pg_trigger_depth() > 1 THEN
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO dead_letter_counts AS c (task, queue, status, n)
        SELECT task, queue, 'pending', count(*) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;
        WITH x AS (SELECT fingerprint, count(*) AS d FROM new_rows GROUP BY 1),
        locked AS (
            SELECT g.fingerprint, x.d FROM error_groups g JOIN x USING (fingerprint)
            ORDER BY g.fingerprint FOR UPDATE OF g
        )
        UPDATE error_groups g SET pending = g.pending + l.d FROM locked l WHERE g.fingerprint = l.fingerprint;
    ELSE
        UPDATE dead_letter_counts c SET n = c.n - x.n
        FROM (SELECT task, queue, count(*) AS n FROM old_rows GROUP BY 1, 2) x
        WHERE c.task = x.task AND c.queue = x.queue AND c.status = 'pending';
        WITH x AS (SELECT fingerprint, count(*) AS d FROM old_rows GROUP BY 1),
        locked AS (
            SELECT g.fingerprint, x.d FROM error_groups g JOIN x USING (fingerprint)
            ORDER BY g.fingerprint FOR UPDATE OF g
        )
        UPDATE error_groups g SET pending = g.pending - l.d FROM locked l WHERE g.fingerprint = l.fingerprint;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Replayed and discarded counts move with the outcome rows.
CREATE FUNCTION dead_letter_outcomes_summarise() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO dead_letter_counts AS c (task, queue, status, n)
        SELECT task, queue, CASE WHEN discarded_at IS NOT NULL THEN 'discarded' ELSE 'replayed' END, count(*)
        FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;
    ELSE
        UPDATE dead_letter_counts c SET n = c.n - x.n
        FROM (SELECT task, queue, CASE WHEN discarded_at IS NOT NULL THEN 'discarded' ELSE 'replayed' END AS status,
                     count(*) AS n FROM old_rows GROUP BY 1, 2, 3) x
        WHERE c.task = x.task AND c.queue = x.queue AND c.status = x.status;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The search indexer reads the letters themselves (FOR KEY SHARE cannot
-- lock through the view's outer join).
CREATE OR REPLACE FUNCTION dead_letter_search_index(batch integer)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    pol mask_policy;
    n bigint;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    WITH taken AS (
        DELETE FROM dead_letter_search_queue q
        WHERE q.dead_letter_id IN (
            SELECT dead_letter_id FROM dead_letter_search_queue ORDER BY dead_letter_id LIMIT batch
            FOR UPDATE SKIP LOCKED)
        RETURNING q.dead_letter_id
    ), letters AS (
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letter_records d
        WHERE d.id IN (SELECT dead_letter_id FROM taken)
        FOR KEY SHARE OF d
    ), built AS (
        INSERT INTO dead_letter_search AS s (dead_letter_id, search_text, policy_version)
        SELECT id, dead_letter_masked_search_text(error_message, args, kwargs,
                coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
            coalesce(pol.version, 0)
        FROM letters ORDER BY id
        ON CONFLICT (dead_letter_id) DO UPDATE SET search_text = EXCLUDED.search_text,
            policy_version = EXCLUDED.policy_version
        RETURNING 1
    )
    SELECT count(*) INTO n FROM taken;
    RETURN n;
END;
$function$;
-- +goose StatementEnd

CREATE TRIGGER dead_letters_summarise_insert AFTER INSERT ON dead_letter_records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_insert();
CREATE TRIGGER dead_letters_summarise_delete AFTER DELETE ON dead_letter_records
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_delete();
CREATE TRIGGER pending_dead_letters_summarise_insert AFTER INSERT ON pending_dead_letters
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_summarise();
CREATE TRIGGER pending_dead_letters_summarise_delete AFTER DELETE ON pending_dead_letters
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_summarise();
CREATE TRIGGER dead_letter_outcomes_summarise_insert AFTER INSERT ON dead_letter_outcomes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_outcomes_summarise();
CREATE TRIGGER dead_letter_outcomes_summarise_delete AFTER DELETE ON dead_letter_outcomes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_outcomes_summarise();

-- +goose Down
DROP VIEW dead_letters;
DROP TRIGGER dead_letters_summarise_insert ON dead_letter_records;
DROP TRIGGER dead_letters_summarise_delete ON dead_letter_records;

ALTER TABLE dead_letter_records
    ADD COLUMN replayed_at timestamptz, ADD COLUMN replayed_by text, ADD COLUMN replay_job_id bigint,
    ADD COLUMN discarded_at timestamptz, ADD COLUMN discarded_by text, ADD COLUMN discard_reason text;
UPDATE dead_letter_records r SET replayed_at = o.replayed_at, replayed_by = o.replayed_by,
    replay_job_id = o.replay_job_id, discarded_at = o.discarded_at, discarded_by = o.discarded_by,
    discard_reason = o.discard_reason
FROM dead_letter_outcomes o WHERE o.failed_at = r.failed_at AND o.dead_letter_id = r.id;
ALTER TABLE dead_letter_records
    ADD COLUMN status text GENERATED ALWAYS AS (
        CASE WHEN discarded_at IS NOT NULL THEN 'discarded'
             WHEN replayed_at IS NOT NULL THEN 'replayed'
             ELSE 'pending' END) STORED,
    ADD CONSTRAINT dead_letters_discard_has_reason CHECK (discarded_at IS NULL OR discard_reason IS NOT NULL),
    ADD CONSTRAINT dead_letters_replay_consistent CHECK ((replayed_at IS NULL) = (replay_job_id IS NULL));

DROP TABLE pending_dead_letters;
DROP TABLE dead_letter_outcomes;
DROP FUNCTION pending_dead_letters_summarise();
DROP FUNCTION dead_letter_outcomes_summarise();
ALTER TABLE dead_letter_records RENAME TO dead_letters;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_index(batch integer)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    pol mask_policy;
    n bigint;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    WITH taken AS (
        DELETE FROM dead_letter_search_queue q
        WHERE q.dead_letter_id IN (
            SELECT dead_letter_id FROM dead_letter_search_queue ORDER BY dead_letter_id LIMIT batch
            FOR UPDATE SKIP LOCKED)
        RETURNING q.dead_letter_id
    ), letters AS (
        SELECT d.id, d.error_message, d.args, d.kwargs FROM dead_letters d
        WHERE d.id IN (SELECT dead_letter_id FROM taken)
        FOR KEY SHARE OF d
    ), built AS (
        INSERT INTO dead_letter_search AS s (dead_letter_id, search_text, policy_version)
        SELECT id, dead_letter_masked_search_text(error_message, args, kwargs,
                coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
            coalesce(pol.version, 0)
        FROM letters ORDER BY id
        ON CONFLICT (dead_letter_id) DO UPDATE SET search_text = EXCLUDED.search_text,
            policy_version = EXCLUDED.policy_version
        RETURNING 1
    )
    SELECT count(*) INTO n FROM taken;
    RETURN n;
END;
$function$;
-- +goose StatementEnd

CREATE INDEX dead_letters_pending_idx ON dead_letters (failed_at DESC, id DESC) WHERE status = 'pending';
CREATE INDEX dead_letters_reason_pending_idx ON dead_letters (reason, failed_at DESC, id DESC) WHERE status = 'pending';
CREATE INDEX dead_letters_error_class_pending_idx ON dead_letters (error_class, failed_at DESC, id DESC) WHERE status = 'pending';

UPDATE jobs j SET replay_of = NULL WHERE replay_of IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = j.replay_of);
ALTER TABLE jobs ADD CONSTRAINT jobs_replay_of_fkey FOREIGN KEY (replay_of) REFERENCES dead_letters (id) ON DELETE SET NULL;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_counts AS c (task, queue, status, n)
    SELECT task, queue, status, count(*) FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;

    INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
    SELECT fingerprint, min(task), min(error_class),
           (array_agg(error_message ORDER BY failed_at DESC))[1],
           count(*), count(*) FILTER (WHERE status = 'pending'), min(failed_at), max(failed_at)
    FROM new_rows GROUP BY fingerprint ORDER BY fingerprint
    ON CONFLICT (fingerprint) DO UPDATE SET
        total = g.total + EXCLUDED.total,
        pending = g.pending + EXCLUDED.pending,
        first_seen = least(g.first_seen, EXCLUDED.first_seen),
        last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
        sample_message = CASE WHEN EXCLUDED.last_seen >= g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END;

    INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
    SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_counts AS c (task, queue, status, n)
    SELECT task, queue, status, sum(d) FROM (
        SELECT task, queue, status, -1 AS d FROM old_rows
        UNION ALL
        SELECT task, queue, status, 1 FROM new_rows
    ) x GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
    ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;

    WITH x AS (
        SELECT fingerprint, sum(d) AS d FROM (
            SELECT fingerprint, -1 AS d FROM old_rows WHERE status = 'pending'
            UNION ALL
            SELECT fingerprint, 1 FROM new_rows WHERE status = 'pending'
        ) y GROUP BY 1 HAVING sum(d) <> 0
    ), locked AS (
        SELECT g.fingerprint, x.d FROM error_groups g JOIN x USING (fingerprint)
        ORDER BY g.fingerprint FOR UPDATE OF g
    )
    UPDATE error_groups g SET pending = g.pending + l.d
    FROM locked l WHERE g.fingerprint = l.fingerprint;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letters_summarise_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_counts c SET n = c.n - x.n
    FROM (SELECT task, queue, status, count(*) AS n FROM old_rows GROUP BY 1, 2, 3) x
    WHERE c.task = x.task AND c.queue = x.queue AND c.status = x.status;

    UPDATE error_groups g SET total = g.total - x.n, pending = g.pending - x.p
    FROM (SELECT fingerprint, count(*) AS n, count(*) FILTER (WHERE status = 'pending') AS p
          FROM old_rows GROUP BY 1) x
    WHERE g.fingerprint = x.fingerprint;
    DELETE FROM error_groups g USING (SELECT DISTINCT fingerprint FROM old_rows) x
    WHERE g.fingerprint = x.fingerprint AND g.total <= 0;
    UPDATE error_groups g SET
        first_seen = (SELECT d.failed_at FROM dead_letters d WHERE d.fingerprint = g.fingerprint
                      ORDER BY d.failed_at, d.id LIMIT 1),
        last_seen = n.failed_at,
        sample_message = n.error_message
    FROM (SELECT DISTINCT fingerprint FROM old_rows) x
    CROSS JOIN LATERAL (SELECT d.failed_at, d.error_message FROM dead_letters d
                        WHERE d.fingerprint = x.fingerprint
                        ORDER BY d.failed_at DESC, d.id DESC LIMIT 1) n
    WHERE g.fingerprint = x.fingerprint;

    UPDATE dead_letter_inflow i SET n = i.n - x.n
    FROM (SELECT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue, count(*) AS n
          FROM old_rows GROUP BY 1, 2, 3) x
    WHERE i.fingerprint = x.fingerprint AND i.hour = x.hour AND i.queue = x.queue;
    DELETE FROM dead_letter_inflow i
    USING (SELECT DISTINCT fingerprint, date_trunc('hour', failed_at, 'UTC') AS hour, queue FROM old_rows) x
    WHERE i.fingerprint = x.fingerprint AND i.hour = x.hour AND i.queue = x.queue AND i.n <= 0;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letters_summarise_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_insert();
CREATE TRIGGER dead_letters_summarise_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_update();
CREATE TRIGGER dead_letters_summarise_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_delete();
