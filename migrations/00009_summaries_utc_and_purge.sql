-- Two ways the summaries of 00002 could disagree with the letters, found in
-- review and reproduced:
--
-- 1. date_trunc('hour', failed_at) truncates in the session's TimeZone. A
--    worker whose connection ran in Asia/Kolkata filed a letter that
--    failed at 10:10 UTC under 09:30 UTC, so the hourly chart showed it in
--    the wrong hour; and when a purge then ran from a UTC session, the
--    delete trigger looked for 10:00, found nothing, and the inflow kept
--    counting a letter that no longer existed. Hours are now whole UTC
--    hours whatever the session says, and the inflow is rebuilt from the
--    letters (its daily and total tables follow through their triggers).
--
-- 2. A purge lowered a group's counts but kept its first_seen, last_seen
--    and sample message, which could belong to letters just deleted:
--    retention purges the oldest letters, so "first seen" was routinely
--    wrong. The delete trigger now reads them again, for the groups it
--    touched, from the (fingerprint, failed_at) index.
--
-- The rebuild holds a SHARE lock on dead_letters (reads go on, writes wait)
-- for the few seconds a grouped scan of the letters takes (5.8 s on a
-- million letters here).

-- +goose Up
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
    -- What is left of each touched group: its oldest and newest letters
    -- and the newest message, each one step along the index.
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

LOCK TABLE dead_letters IN SHARE MODE;

-- Rebuilt through its own triggers, so the daily and total tables follow.
DELETE FROM dead_letter_inflow;
INSERT INTO dead_letter_inflow (fingerprint, hour, queue, task, n)
SELECT fingerprint, date_trunc('hour', failed_at, 'UTC'), queue, min(task), count(*)
FROM dead_letters GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;

-- Groups that earlier purges left with stale bounds.
UPDATE error_groups g SET first_seen = f.first_seen, last_seen = n.failed_at, sample_message = n.error_message
FROM (SELECT fingerprint, min(failed_at) AS first_seen FROM dead_letters GROUP BY 1) f
CROSS JOIN LATERAL (SELECT d.failed_at, d.error_message FROM dead_letters d WHERE d.fingerprint = f.fingerprint
                    ORDER BY d.failed_at DESC, d.id DESC LIMIT 1) n
WHERE g.fingerprint = f.fingerprint
  AND (g.first_seen, g.last_seen) IS DISTINCT FROM (f.first_seen, n.failed_at);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
-- Back to 00002's functions; the data stays as rebuilt.
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
    SELECT fingerprint, date_trunc('hour', failed_at), queue, min(task), count(*)
    FROM new_rows GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION dead_letters_summarise_delete() RETURNS trigger LANGUAGE plpgsql AS $$
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
-- +goose StatementEnd
