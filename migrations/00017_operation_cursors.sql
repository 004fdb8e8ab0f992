-- A bulk operation by filter now walks its letters in the list's order
-- read backwards, oldest first on (failed_at, id), through whichever index
-- matches the filter, instead of in id order through the primary key with the filter
-- applied to every row on the way (which, for "failed since T" on a million
-- letters, read ten rows for each one it kept, and far more for a narrow
-- filter). The position is then a pair; cursor_id keeps the id half, and
-- this column the failed_at half. NULL: the operation has not started, or
-- it was started by an earlier version that walked by id alone; both start
-- again from the oldest letter, which is safe because a batch only ever
-- takes pending letters (a letter already handled is never seen again).
--
-- lane_cursors holds the same position for each lane when an operation's
-- batches run two at a time (dlq.RunOperationLane): {"0": {...}, "1": ...}.
--
-- The statement trigger that moves the summaries on a replay or discard
-- now locks the error groups it changes in fingerprint order, as the
-- counts already were (ON CONFLICT in key order): two batches running at
-- once that touch the same groups then wait for one another instead of
-- deadlocking.
--
-- A nullable column without a default changes only the catalogue. The
-- brief ACCESS EXCLUSIVE lock gives up after 5 s rather than queue the
-- console behind a long transaction (rerun the migration).

-- +goose Up
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations ADD COLUMN IF NOT EXISTS cursor_failed_at timestamptz;
ALTER TABLE operations ADD COLUMN IF NOT EXISTS lane_cursors jsonb;

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

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE operations DROP COLUMN IF EXISTS lane_cursors;
ALTER TABLE operations DROP COLUMN IF EXISTS cursor_failed_at;

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
-- +goose StatementEnd
