-- +goose Up
-- +goose StatementBegin

-- The console answers "what is dead, since when, why and how much" on a
-- table of millions of letters in well under 100 ms. Scanning the table for
-- every page view cannot do that, so the aggregates the pages show are kept
-- up to date as letters arrive and change, by STATEMENT-level triggers with
-- transition tables: a bulk replay of 100,000 letters updates each summary
-- row once per statement, not once per letter.

-- Free-text search over the error message and the arguments. A trigram GIN
-- index serves ILIKE '%term%' for any substring; the text is capped so one
-- huge payload cannot bloat the index.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE dead_letters ADD COLUMN search_text text GENERATED ALWAYS AS (
    left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000)
) STORED;
CREATE INDEX dead_letters_search_idx ON dead_letters USING gin (search_text gin_trgm_ops);
CREATE INDEX dead_letters_error_class_idx ON dead_letters (error_class, failed_at DESC, id DESC);

-- How many letters per task, queue and status: the overview's headline
-- numbers and the list's exact count when the filter is only these columns.
CREATE TABLE dead_letter_counts (
    task   text   NOT NULL,
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (task, queue, status)
);

-- One row per fingerprint: "one bug, 40,000 letters".
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

-- Letters per hour, per fingerprint and queue: the inflow charts (24 hours,
-- 14 days) and each group's sparkline read this instead of the letters.
CREATE TABLE dead_letter_inflow (
    fingerprint text        NOT NULL,
    hour        timestamptz NOT NULL,
    queue       text        NOT NULL,
    task        text        NOT NULL,
    n           bigint      NOT NULL,
    PRIMARY KEY (fingerprint, hour, queue)
);
CREATE INDEX dead_letter_inflow_hour_idx ON dead_letter_inflow (hour);

-- Each trigger function folds a statement's rows into the summaries with
-- signed deltas; ORDER BY keeps the lock order fixed, so two statements
-- touching the same summary rows wait for each other instead of deadlocking.
CREATE FUNCTION dead_letters_summarise_insert() RETURNS trigger LANGUAGE plpgsql AS $$
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
    SELECT fingerprint, date_trunc('hour', failed_at), queue, min(task), count(*)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;

-- Updates change status (replay, discard, restore); counts move between
-- statuses and a group's pending figure follows.
CREATE FUNCTION dead_letters_summarise_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_counts AS c (task, queue, status, n)
    SELECT task, queue, status, sum(d) FROM (
        SELECT task, queue, status, -1 AS d FROM old_rows
        UNION ALL
        SELECT task, queue, status, 1 FROM new_rows
    ) x GROUP BY 1, 2, 3 HAVING sum(d) <> 0 ORDER BY 1, 2, 3
    ON CONFLICT (task, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;

    UPDATE error_groups g SET pending = g.pending + x.d
    FROM (
        SELECT fingerprint, sum(d) AS d FROM (
            SELECT fingerprint, -1 AS d FROM old_rows WHERE status = 'pending'
            UNION ALL
            SELECT fingerprint, 1 FROM new_rows WHERE status = 'pending'
        ) y GROUP BY 1 HAVING sum(d) <> 0
    ) x
    WHERE g.fingerprint = x.fingerprint;
    RETURN NULL;
END;
$$;

-- Deletes (retention purge) take letters out of every summary.
CREATE FUNCTION dead_letters_summarise_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_counts c SET n = c.n - x.n
    FROM (SELECT task, queue, status, count(*) AS n FROM old_rows GROUP BY 1, 2, 3) x
    WHERE c.task = x.task AND c.queue = x.queue AND c.status = x.status;

    UPDATE error_groups g SET total = g.total - x.n, pending = g.pending - x.p
    FROM (SELECT fingerprint, count(*) AS n, count(*) FILTER (WHERE status = 'pending') AS p
          FROM old_rows GROUP BY 1) x
    WHERE g.fingerprint = x.fingerprint;
    DELETE FROM error_groups WHERE total <= 0;

    UPDATE dead_letter_inflow i SET n = i.n - x.n
    FROM (SELECT fingerprint, date_trunc('hour', failed_at) AS hour, queue, count(*) AS n
          FROM old_rows GROUP BY 1, 2, 3) x
    WHERE i.fingerprint = x.fingerprint AND i.hour = x.hour AND i.queue = x.queue;
    DELETE FROM dead_letter_inflow WHERE n <= 0;
    RETURN NULL;
END;
$$;

CREATE TRIGGER dead_letters_summarise_insert AFTER INSERT ON dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_insert();
CREATE TRIGGER dead_letters_summarise_update AFTER UPDATE ON dead_letters
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_update();
CREATE TRIGGER dead_letters_summarise_delete AFTER DELETE ON dead_letters
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_summarise_delete();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER dead_letters_summarise_delete ON dead_letters;
DROP TRIGGER dead_letters_summarise_update ON dead_letters;
DROP TRIGGER dead_letters_summarise_insert ON dead_letters;
DROP FUNCTION dead_letters_summarise_delete();
DROP FUNCTION dead_letters_summarise_update();
DROP FUNCTION dead_letters_summarise_insert();
DROP TABLE dead_letter_inflow;
DROP TABLE error_groups;
DROP TABLE dead_letter_counts;
DROP INDEX dead_letters_error_class_idx;
DROP INDEX dead_letters_search_idx;
ALTER TABLE dead_letters DROP COLUMN search_text;
-- +goose StatementEnd
