-- Dead letters: the facts of each letter, whether it is still pending or
-- what became of it, and the summaries the console reads instead of the
-- letters.

-- +goose Up

-- A dead letter is a self-contained copy of a job that will not run again on
-- its own: everything needed to diagnose it (error, traceback, every attempt)
-- and to replay it (task, queue, args, kwargs). It does not reference jobs by
-- foreign key so that finished jobs can be pruned without losing letters.
--
-- A letter's facts are written once; what happens to it later lives apart,
-- in three tables:
--
-- 1. dead_letter_records holds the facts of each letter (what failed, how,
--    with what), inserted once and never updated by an action.
-- 2. pending_dead_letters holds one narrow row per pending letter, with
--    the columns the pending views filter and sort on. Replaying or
--    discarding a letter deletes its row (no index entry written); the
--    DELETE is also the guard: of two actions racing for a letter, only
--    the one whose DELETE removed the row goes on. Restoring a discarded
--    letter inserts the row again.
-- 3. dead_letter_outcomes holds one narrow row per replayed or discarded
--    letter: who, when, why, which replay job.
--
-- Settling a letter in place would write a new version of its whole row
-- (1.6 KB on average, tracebacks and attempt history included), never a
-- HOT update, so an entry in each of its indexes and a full-page image of
-- the old row's page after every checkpoint. EXPLAIN (ANALYZE, BUFFERS,
-- WAL) of one bulk discard batch of 2,000 among 1,000,000 seeded letters,
-- right after a CHECKPOINT: 198 ms, 18,478 WAL records, 1,003 full-page
-- images and 11.9 MB of WAL that way; 42 ms and 1.4 MB of WAL on these
-- three tables.
--
-- No foreign keys between them, nor from jobs.replay_of, nor from a
-- letter's replay_of to the letter it replays: checking a key locks the
-- referenced row (FOR KEY SHARE), which writes to the letter's wide row and
-- its page, the very write this layout takes away; and every inserted
-- letter, linked or not, queues an AFTER ROW event that fetches the row back
-- from the heap (about 6% of the server's CPU seeding a million letters).
-- The triggers below keep them consistent instead: a letter's pending and
-- outcome rows go with it, and the letters that replay a deleted letter
-- lose the link, as ON DELETE SET NULL did.
--
-- The table was first called dead_letters, the name its view (below) has
-- now: its constraints, indexes and identity sequence still say so.
CREATE TABLE dead_letter_records (
    id               bigint      GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME dead_letters_id_seq),
    job_id           bigint      NOT NULL,
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
    -- The attempts, as json: the text as written, not jsonb. It is most of
    -- what a letter carries (1.6 KB of the seed's 2.7 KB) and nothing in the
    -- database looks inside it but the detail page's cut of a long attempt
    -- traceback: it is written once and read whole by Go. jsonb parses every
    -- value on the way in: jsonb_in was 15.7% of the server's CPU in perf of
    -- `redrive seed`, and casting 200,000 seeded histories took 9.4 and 11.7
    -- s a million as jsonb, 3.4 and 5.3 s as json. The worker still builds
    -- a job's attempts as jsonb (jobs.errors); the insert casts them.
    history          json        NOT NULL DEFAULT '[]',
    reason           text        NOT NULL,
    -- The letter's error group, as the grouper (package grouping) named it
    -- when it first met the failure; error_templates holds what it learned.
    fingerprint      text        NOT NULL,
    worker_version   text        NOT NULL DEFAULT '',
    enqueued_at      timestamptz NOT NULL,
    failed_at        timestamptz NOT NULL DEFAULT now(),
    -- The letter whose replay failed again as this one (the worker copies
    -- it from jobs.replay_of). A letter written while the letter it replays
    -- is being purged may keep a link to a letter that is gone; the detail
    -- page then says that letter was not found. Purges take letters settled
    -- days ago, whose replays ran long before.
    replay_of        bigint,

    CONSTRAINT dead_letters_pkey PRIMARY KEY (id),
    CONSTRAINT dead_letters_job_id_key UNIQUE (job_id),
    CONSTRAINT dead_letters_reason_valid CHECK (reason IN ('exhausted', 'permanent', 'lease_expired', 'killed', 'cancelled'))
);

-- The console lists letters newest first with keyset pagination on
-- (failed_at, id), usually narrowed by one of task, queue, error class or
-- error group. One composite index per common narrowing keeps every first
-- page an index range scan, however many million rows the table holds; a
-- pending view by one of these walks the letters' index and probes the
-- pending rows' key (dlq's Filter.source), so that the pending rows need no
-- index of their own on them.
--
-- The index on time alone runs oldest to newest: letters arrive in time
-- order, and in a descending index every new entry goes in at the far left,
-- splitting the leaf it fills in half and never writing the right half
-- again, while in an ascending one it goes in at the far right, where
-- Postgres keeps a pointer to the last leaf and leaves a full one 90% full.
-- A million rows in time order: 54 MB descending, 30 MB ascending, and the
-- inserts 8.6 s against 6.9 s. A btree reads backwards as easily, so
-- "newest first" walks it from its end. The indexes that lead with a key
-- stay descending: the letters of many keys arrive interleaved, and their
-- leaves fill to about half in either order.
CREATE INDEX dead_letters_failed_idx      ON dead_letter_records (failed_at, id);
CREATE INDEX dead_letters_task_idx        ON dead_letter_records (task, failed_at DESC, id DESC);
CREATE INDEX dead_letters_queue_idx       ON dead_letter_records (queue, failed_at DESC, id DESC);
CREATE INDEX dead_letters_error_class_idx ON dead_letter_records (error_class, failed_at DESC, id DESC);
-- Also what the delete trigger reads a group's first and last letters
-- from. "Pending letters of group X" needs no index of its own: its count
-- is error_groups.pending, and the list and a bulk lane read a few dozen
-- buffers along this range for a page
-- (TestPendingFingerprintReadsUseTheFingerprintIndex).
CREATE INDEX dead_letters_fingerprint_idx ON dead_letter_records (fingerprint, failed_at DESC, id DESC);
-- The letters that replay a given letter, for the delete trigger.
CREATE INDEX dead_letters_replay_of_idx   ON dead_letter_records (replay_of) WHERE replay_of IS NOT NULL;

-- The pending letters, narrow: by time and by reason they have indexes of
-- their own (their counts are index-only scans on them); by anything else
-- the views read the letters' index on the column.
CREATE TABLE pending_dead_letters (
    id          bigint      PRIMARY KEY,
    failed_at   timestamptz NOT NULL,
    task        text        NOT NULL,
    queue       text        NOT NULL,
    reason      text        NOT NULL,
    error_class text        NOT NULL,
    fingerprint text        NOT NULL
);
CREATE INDEX pending_dead_letters_failed_idx ON pending_dead_letters (failed_at, id);
CREATE INDEX pending_dead_letters_reason_idx ON pending_dead_letters (reason, failed_at DESC, id DESC);

-- Its key is (failed_at, dead_letter_id), not the letter's id alone, so that
-- a bulk action, which walks letters in failed_at order, writes its keys
-- into a few adjacent index pages rather than one random page (and one
-- full-page image) per letter: with the id alone as the key, the batch
-- above wrote 1,024 full-page images and 8.7 MB of WAL.
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
-- The purge's walk: settled letters, oldest outcome first. An action
-- appends at its end (now()), so it costs a bulk action one adjacent entry.
CREATE INDEX dead_letter_outcomes_settled_idx ON dead_letter_outcomes ((coalesce(discarded_at, replayed_at)));

-- Every letter with its outcome and status, as one row: what most reads
-- of a letter ask for. A read that names no outcome column costs no join
-- (Postgres removes the LEFT JOIN on a unique key). The pending views read
-- pending_dead_letters (letterSource in dlq/dead_letters_query.go).
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

-- A letter's traceback and history are most of its bytes, and PostgreSQL
-- compresses a row's large values before it stores them: with pglz, the
-- default, pglz_compress was the largest single function in perf of a
-- server-side COPY of 100,000 seeded letters (13.5% of the backend's time).
-- lz4 does the same job several times faster, both ways: the same COPY took
-- 12.6 and 13.4 s with lz4 against 14.5 and 15.8 s with pglz, and a
-- letter's page decompresses its traceback faster too. lz4 is there only in
-- a server built with it (Debian's, the PGDG packages and the official
-- images are); a server without it keeps pglz.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE dead_letter_records
            ALTER COLUMN traceback SET COMPRESSION lz4,
            ALTER COLUMN history SET COMPRESSION lz4,
            ALTER COLUMN error_message SET COMPRESSION lz4,
            ALTER COLUMN args SET COMPRESSION lz4,
            ALTER COLUMN kwargs SET COMPRESSION lz4;
    END IF;
END
$$;
-- +goose StatementEnd

-- The summaries. The console answers "what is dead, since when, why and
-- how much" on a table of millions of letters in well under 100 ms.
-- Scanning the letters for every page view cannot do that, so the
-- aggregates the pages show are kept up to date as letters arrive and
-- change, by STATEMENT-level triggers with transition tables: a bulk
-- replay of 100,000 letters updates each summary row once per statement,
-- not once per letter. Each trigger folds a statement's rows into the
-- summaries with signed deltas; ORDER BY keeps the lock order fixed, so two
-- statements touching the same summary rows wait for each other instead of
-- deadlocking. Hours are whole UTC hours (date_trunc(..., 'UTC')) whatever
-- the session's TimeZone, so that a purge from another session finds the
-- hour a letter was counted in.

-- How many letters per task, queue and status: the overview's headline
-- numbers and the list's exact count when the filter is only these columns.
CREATE TABLE dead_letter_counts (
    task   text   NOT NULL,
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (task, queue, status)
);

-- One row per error group: "one bug, 40,000 letters".
CREATE TABLE error_groups (
    fingerprint    text        PRIMARY KEY,
    task           text        NOT NULL,
    error_class    text        NOT NULL,
    sample_message text        NOT NULL,
    total          bigint      NOT NULL,
    pending        bigint      NOT NULL,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL
);
CREATE INDEX error_groups_pending_idx ON error_groups (pending DESC, last_seen DESC);
CREATE INDEX error_groups_last_seen_idx ON error_groups (last_seen DESC);

-- Letters per hour, per group and queue: the inflow charts and each group's
-- recent inflow read this instead of the letters.
CREATE TABLE dead_letter_inflow (
    fingerprint text        NOT NULL,
    hour        timestamptz NOT NULL,
    queue       text        NOT NULL,
    task        text        NOT NULL,
    n           bigint      NOT NULL,
    PRIMARY KEY (fingerprint, hour, queue)
);
CREATE INDEX dead_letter_inflow_hour_idx ON dead_letter_inflow (hour);

-- Letters per UTC day and group: the groups page draws a 14-day sparkline
-- for each of up to 200 groups in one query, and summing the hourly inflow
-- for that is 50,000+ rows (40-60 ms); the daily rows are 14 per group.
CREATE TABLE dead_letter_inflow_daily (
    fingerprint text   NOT NULL,
    day         date   NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (fingerprint, day)
);

-- Letters per UTC hour: the overview charts 24 hours and 14 days, which on
-- a million letters of a few thousand groups would sum ~280,000 hourly rows
-- (or ~50,000 daily ones) on every 5-second refresh; here both read at most
-- 336. The current hour's row is updated by every statement that
-- dead-letters anything; the per-group rows upstream already serialise a
-- burst of one failure the same way, and the lock is held only to the end
-- of a short transaction.
CREATE TABLE dead_letter_inflow_totals (
    hour timestamptz PRIMARY KEY, -- a whole UTC hour
    n    bigint      NOT NULL
);

-- A new letter is pending: its pending row is written here, so that every
-- writer of letters (the worker, the rescuer, the seed's COPY) gets it, and
-- counted here with the letter, in one upsert of each summary row: the
-- pending rows' own trigger leaves the rows this trigger writes to it
-- (counting them there would update each error group's row a second time
-- in every dead-lettering statement, a row that concurrent writers of the
-- same failure wait for). The letters are queued for search as one row per
-- statement (dead_letter_search_queue).
--
-- The statement's new rows are whole letters (about 2.8 KB each, kept in a
-- temporary file past work_mem), so one statement reads the columns it
-- needs into a materialised CTE once and writes all five tables from it:
-- five statements reading the rows again took 20 s of the server's time
-- seeding a million letters, this one 16 s. Its parts lock what they
-- update in the same order every time (one plan, each part sorted by its
-- key), so concurrent dead-lettering batches cannot deadlock.
--
-- A bulk load of letters that are all replayed or discarded
-- (dlq.Store.LoadSettledDeadLetters, for `redrive seed`) sets
-- redrive.load_settled for its transaction and writes every letter's
-- outcome before it commits: then no pending row is written and nothing is
-- counted pending (the outcomes' trigger counts them replayed or
-- discarded), instead of a heap row and three index entries written and
-- deleted again for each settled letter.
-- +goose StatementBegin
CREATE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    settled boolean := coalesce(current_setting('redrive.load_settled', true), '') = 'on';
BEGIN
    WITH n AS MATERIALIZED (
        SELECT id, failed_at, task, queue, reason, error_class, fingerprint, error_message FROM new_rows
    ), counts AS (
        INSERT INTO dead_letter_counts AS c (task, queue, status, n)
        SELECT task, queue, 'pending', count(*) FROM n WHERE NOT settled GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n
    ), groups AS (
        INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
        SELECT fingerprint, min(task), min(error_class),
               (array_agg(error_message ORDER BY failed_at DESC))[1],
               count(*), CASE WHEN settled THEN 0 ELSE count(*) END, min(failed_at), max(failed_at)
        FROM n GROUP BY fingerprint ORDER BY fingerprint
        ON CONFLICT (fingerprint) DO UPDATE SET
            total = g.total + EXCLUDED.total,
            pending = g.pending + EXCLUDED.pending,
            first_seen = least(g.first_seen, EXCLUDED.first_seen),
            last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
            sample_message = CASE WHEN EXCLUDED.last_seen >= g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END
    ), inflow AS (
        INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
        SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
        FROM n GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n
    ), search AS (
        INSERT INTO dead_letter_search_queue (first_id, ids, n)
        SELECT min(id), array_agg(id ORDER BY id), count(*) FROM n HAVING count(*) > 0
    )
    INSERT INTO pending_dead_letters (id, failed_at, task, queue, reason, error_class, fingerprint)
    SELECT id, failed_at, task, queue, reason, error_class, fingerprint FROM n WHERE NOT settled;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- A letter deleted (a purge) takes its pending or outcome row with it;
-- their own triggers then take it out of the counts. A group's first_seen,
-- last_seen and sample message may have belonged to letters just deleted
-- (retention purges the oldest), so they are read again, for the groups it
-- touched, from dead_letters_fingerprint_idx.
-- +goose StatementBegin
CREATE FUNCTION dead_letters_summarise_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- What ON DELETE SET NULL would do, once per statement: the letters that
-- replay a deleted letter lose the link.
-- +goose StatementBegin
CREATE FUNCTION dead_letters_unlink_replays() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- dead_letters_replay_of_idx finds the links; letters deleted by the
    -- same statement are gone already and are not touched.
    UPDATE dead_letter_records SET replay_of = NULL WHERE replay_of IN (SELECT id FROM old_rows);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- Pending counts, by task and queue and by error group, move with the
-- pending rows: a replay or discard deletes them, a restore inserts one
-- again. The rows the letters' insert trigger writes (one trigger deeper)
-- are counted there. The error groups are locked in fingerprint order, as
-- the counts are by ON CONFLICT in key order, so two batches running at
-- once that touch the same groups wait for one another instead of
-- deadlocking.
-- +goose StatementBegin
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

-- Replayed and discarded counts move with the outcome rows.
-- +goose StatementBegin
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

CREATE TRIGGER dead_letters_summarise_insert AFTER INSERT ON dead_letter_records
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_insert();
CREATE TRIGGER dead_letters_summarise_delete AFTER DELETE ON dead_letter_records
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_delete();
CREATE TRIGGER dead_letters_unlink_replays AFTER DELETE ON dead_letter_records
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_unlink_replays();
CREATE TRIGGER pending_dead_letters_summarise_insert AFTER INSERT ON pending_dead_letters
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_summarise();
CREATE TRIGGER pending_dead_letters_summarise_delete AFTER DELETE ON pending_dead_letters
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pending_dead_letters_summarise();
CREATE TRIGGER dead_letter_outcomes_summarise_insert AFTER INSERT ON dead_letter_outcomes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_outcomes_summarise();
CREATE TRIGGER dead_letter_outcomes_summarise_delete AFTER DELETE ON dead_letter_outcomes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_outcomes_summarise();

-- The daily and total inflow are derived from the hourly inflow by its own
-- triggers, so they follow every insert, purge and correction of it
-- without touching the letters' triggers, and a statement that changes
-- 100,000 hourly rows changes each daily row once. An INSERT ... ON
-- CONFLICT DO UPDATE on the hourly table fires the insert trigger with the
-- rows it inserted and the update trigger with the rows it updated, so
-- between them every change is counted once.
-- One function applies a statement's changes of the hourly rows to both
-- rollups, the daily one per group and the hourly total: each key gets the
-- sum of its deltas (the new rows' n, less the old rows'), and a row left
-- at zero goes. The trigger function turns each kind of statement into
-- deltas.
--
-- A regrouping (store/groups, RebuildGroups) rewrites the whole hourly
-- table and then the rollups from it, with redrive.inflow_rollup 'off'
-- for its transaction: as deltas, a million letters each in a group of
-- its own made one statement's arrays a million long, and the daily
-- upsert's hash aggregate spilled to disk over and over (still running
-- after ten minutes), where recounting both rollups takes about a second.
-- +goose StatementBegin
CREATE FUNCTION dead_letter_inflow_apply(fps text[], hours timestamptz[], ns bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_inflow_daily AS d (fingerprint, day, n)
    SELECT fp, (h AT TIME ZONE 'UTC')::date, sum(n) FROM unnest(fps, hours, ns) AS x(fp, h, n)
    GROUP BY 1, 2 HAVING sum(n) <> 0 ORDER BY 1, 2
    ON CONFLICT (fingerprint, day) DO UPDATE SET n = d.n + EXCLUDED.n;
    INSERT INTO dead_letter_inflow_totals AS t (hour, n)
    SELECT h, sum(n) FROM unnest(hours, ns) AS x(h, n) GROUP BY 1 HAVING sum(n) <> 0 ORDER BY 1
    ON CONFLICT (hour) DO UPDATE SET n = t.n + EXCLUDED.n;
    -- Only a statement that took counts off can leave a row at zero.
    IF EXISTS (SELECT 1 FROM unnest(ns) AS x(n) WHERE n < 0) THEN
        DELETE FROM dead_letter_inflow_daily d WHERE d.n <= 0
            AND (d.fingerprint, d.day) IN (SELECT fp, (h AT TIME ZONE 'UTC')::date FROM unnest(fps, hours) AS x(fp, h));
        DELETE FROM dead_letter_inflow_totals t WHERE t.n <= 0 AND t.hour = ANY (hours);
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION dead_letter_inflow_rollup() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('redrive.inflow_rollup', true), '') = 'off' THEN
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM dead_letter_inflow_apply(array_agg(fingerprint), array_agg(hour), array_agg(n)) FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM dead_letter_inflow_apply(array_agg(fingerprint), array_agg(hour), array_agg(-n)) FROM old_rows;
    ELSE
        PERFORM dead_letter_inflow_apply(array_agg(fingerprint), array_agg(hour), array_agg(n))
        FROM (SELECT fingerprint, hour, -n AS n FROM old_rows UNION ALL SELECT fingerprint, hour, n FROM new_rows) x;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letter_inflow_rollup_insert AFTER INSERT ON dead_letter_inflow
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_rollup();
CREATE TRIGGER dead_letter_inflow_rollup_update AFTER UPDATE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_rollup();
CREATE TRIGGER dead_letter_inflow_rollup_delete AFTER DELETE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_rollup();

-- +goose Down
-- IF EXISTS on the rollup functions: a database migrated by a build of this
-- baseline from before they were merged (pre-release, throwaway) has
-- functions of other names doing the same, which this leaves.
DROP TABLE dead_letter_inflow_totals;
DROP TABLE dead_letter_inflow_daily;
DROP TABLE dead_letter_inflow;
DROP TABLE error_groups;
DROP TABLE dead_letter_counts;
DROP VIEW dead_letters;
DROP TABLE dead_letter_outcomes;
DROP TABLE pending_dead_letters;
DROP TABLE dead_letter_records;
DROP FUNCTION IF EXISTS dead_letter_inflow_rollup();
DROP FUNCTION IF EXISTS dead_letter_inflow_apply(text[], timestamptz[], bigint[]);
DROP FUNCTION dead_letter_outcomes_summarise();
DROP FUNCTION pending_dead_letters_summarise();
DROP FUNCTION dead_letters_unlink_replays();
DROP FUNCTION dead_letters_summarise_delete();
DROP FUNCTION dead_letters_summarise_insert();
