-- +goose Up
-- +goose StatementBegin

-- The dead-letter list counts what a filter matches by reading at most
-- 10,001 letters (dlq.LetterCountCap). When the filter pairs a status (the
-- list defaults to pending) with reason, error class or fingerprint, the
-- indexes of 00001/00002 find the rows but must visit the heap to check the
-- status: 10,000 random heap reads, 40-200 ms on a million letters. With
-- the status inside the index the count is an index-only scan of one range
-- (a few ms), and the list's first page of "fingerprint X, pending, newest
-- first" is the head of that same range.
CREATE INDEX dead_letters_reason_status_idx      ON dead_letters (reason, status, failed_at DESC, id DESC);
CREATE INDEX dead_letters_error_class_status_idx ON dead_letters (error_class, status, failed_at DESC, id DESC);
CREATE INDEX dead_letters_fingerprint_status_idx ON dead_letters (fingerprint, status, failed_at DESC, id DESC);

-- Letters per UTC day and fingerprint: the groups page draws a 14-day
-- sparkline for each of up to 200 groups in one query, and summing the
-- hourly inflow for that is 50,000+ rows (40-60 ms); the daily rows are
-- 14 per group. They are derived from dead_letter_inflow by its own
-- statement-level triggers (as 00002 derives the summaries from the
-- letters), so they follow every insert, purge and correction of the
-- hourly table without touching the dead-letter triggers, and a statement
-- that changes 100,000 hourly rows changes each daily row once. ORDER BY
-- keeps the lock order fixed, as in 00002.
CREATE TABLE dead_letter_inflow_daily (
    fingerprint text   NOT NULL,
    day         date   NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (fingerprint, day)
);

INSERT INTO dead_letter_inflow_daily (fingerprint, day, n)
SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, sum(n) FROM dead_letter_inflow GROUP BY 1, 2;

-- An INSERT ... ON CONFLICT DO UPDATE on the hourly table fires the insert
-- trigger with the rows it inserted and the update trigger with the rows it
-- updated, so between them every change is counted once.
CREATE FUNCTION dead_letter_inflow_daily_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_inflow_daily AS d (fingerprint, day, n)
    SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, sum(n) FROM new_rows GROUP BY 1, 2 ORDER BY 1, 2
    ON CONFLICT (fingerprint, day) DO UPDATE SET n = d.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;

CREATE FUNCTION dead_letter_inflow_daily_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_inflow_daily AS d (fingerprint, day, n)
    SELECT fingerprint, day, sum(delta) FROM (
        SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day, -n AS delta FROM old_rows
        UNION ALL
        SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, n FROM new_rows
    ) x GROUP BY 1, 2 HAVING sum(delta) <> 0 ORDER BY 1, 2
    ON CONFLICT (fingerprint, day) DO UPDATE SET n = d.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;

CREATE FUNCTION dead_letter_inflow_daily_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_inflow_daily d SET n = d.n - x.n
    FROM (SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day, sum(n) AS n FROM old_rows GROUP BY 1, 2) x
    WHERE d.fingerprint = x.fingerprint AND d.day = x.day;
    DELETE FROM dead_letter_inflow_daily d
    USING (SELECT DISTINCT fingerprint, (hour AT TIME ZONE 'UTC')::date AS day FROM old_rows) x
    WHERE d.fingerprint = x.fingerprint AND d.day = x.day AND d.n <= 0;
    RETURN NULL;
END;
$$;

CREATE TRIGGER dead_letter_inflow_daily_insert AFTER INSERT ON dead_letter_inflow
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_daily_insert();
CREATE TRIGGER dead_letter_inflow_daily_update AFTER UPDATE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_daily_update();
CREATE TRIGGER dead_letter_inflow_daily_delete AFTER DELETE ON dead_letter_inflow
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION dead_letter_inflow_daily_delete();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER dead_letter_inflow_daily_delete ON dead_letter_inflow;
DROP TRIGGER dead_letter_inflow_daily_update ON dead_letter_inflow;
DROP TRIGGER dead_letter_inflow_daily_insert ON dead_letter_inflow;
DROP FUNCTION dead_letter_inflow_daily_delete();
DROP FUNCTION dead_letter_inflow_daily_update();
DROP FUNCTION dead_letter_inflow_daily_insert();
DROP TABLE dead_letter_inflow_daily;
DROP INDEX dead_letters_fingerprint_status_idx;
DROP INDEX dead_letters_error_class_status_idx;
DROP INDEX dead_letters_reason_status_idx;
-- +goose StatementEnd
