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
-- 14 per group. They are derived from dead_letter_inflow, row by row, so
-- they follow every insert, purge and correction of the hourly table
-- without touching the dead-letter triggers; the hourly triggers change
-- rows in key order, so these upserts take their locks in order too.
CREATE TABLE dead_letter_inflow_daily (
    fingerprint text   NOT NULL,
    day         date   NOT NULL,
    n           bigint NOT NULL,
    PRIMARY KEY (fingerprint, day)
);

INSERT INTO dead_letter_inflow_daily (fingerprint, day, n)
SELECT fingerprint, (hour AT TIME ZONE 'UTC')::date, sum(n) FROM dead_letter_inflow GROUP BY 1, 2;

CREATE FUNCTION dead_letter_inflow_roll_daily() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE dead_letter_inflow_daily SET n = n - OLD.n
        WHERE fingerprint = OLD.fingerprint AND day = (OLD.hour AT TIME ZONE 'UTC')::date;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO dead_letter_inflow_daily AS d (fingerprint, day, n)
        VALUES (NEW.fingerprint, (NEW.hour AT TIME ZONE 'UTC')::date, NEW.n)
        ON CONFLICT (fingerprint, day) DO UPDATE SET n = d.n + EXCLUDED.n;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM dead_letter_inflow_daily
        WHERE fingerprint = OLD.fingerprint AND day = (OLD.hour AT TIME ZONE 'UTC')::date AND n <= 0;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER dead_letter_inflow_roll_daily AFTER INSERT OR UPDATE OR DELETE ON dead_letter_inflow
    FOR EACH ROW EXECUTE FUNCTION dead_letter_inflow_roll_daily();
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TRIGGER dead_letter_inflow_roll_daily ON dead_letter_inflow;
DROP FUNCTION dead_letter_inflow_roll_daily();
DROP TABLE dead_letter_inflow_daily;
DROP INDEX dead_letters_fingerprint_status_idx;
DROP INDEX dead_letters_error_class_status_idx;
DROP INDEX dead_letters_reason_status_idx;
-- +goose StatementEnd
