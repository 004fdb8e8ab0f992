-- Per-task timings (issue 32), and purges held for growing groups.

-- +goose Up

-- What the workers saw of each task, summarised: a row per task per minute
-- (kept two hours, for the task page's last hour) and per hour (kept
-- fifteen days, for its last day and fortnight). A worker counts its
-- attempts in memory and flushes them every few seconds with one statement
-- that adds its counts to the minute's row and to the hour's (ON CONFLICT
-- ... DO UPDATE), so the cost is a couple of row updates per task per
-- flush, never a write per job, and the task page reads summaries only,
-- never the jobs. wait and run are histograms of fixed log-scale buckets
-- (dlq.TimingBucket: four per doubling from 100 µs), trimmed of their
-- trailing empty buckets; same buckets add up exactly, which is what lets
-- several workers' flushes, and a day of hours, be merged by addition.
-- Size: 50 busy tasks keep 50 × 120 minute rows and 50 × 360 hour rows,
-- 24,000 rows of a few hundred bytes (about 10 MB); the worker's cleaner
-- prunes older ones.
CREATE TABLE task_timings (
    task     text        NOT NULL,
    span     text        NOT NULL,
    start_at timestamptz NOT NULL,
    runs     bigint      NOT NULL,
    failures bigint      NOT NULL,
    dead     bigint      NOT NULL,
    wait     bigint[]    NOT NULL,
    run      bigint[]    NOT NULL,
    PRIMARY KEY (task, span, start_at),
    CONSTRAINT task_timings_span_valid CHECK (span IN ('minute', 'hour'))
);
-- The prune and the /tasks index read by span and time across tasks.
CREATE INDEX task_timings_span_start_idx ON task_timings (span, start_at);

-- Adds two histograms bucket by bucket; the shorter is read as padded
-- with zeros (unnest of two arrays pads with NULLs).
CREATE FUNCTION timing_histogram_add(a bigint[], b bigint[]) RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i), '{}')
    FROM unnest(a, b) WITH ORDINALITY AS u(x, y, i)
$$;

-- Purges held because their group is still growing. A retention purge
-- (the console's, REDRIVE_RETAIN_LETTERS, or `redrive purge --older-than`)
-- does not delete the settled letters of a group that had a new letter in
-- the hour before it: an incident still going on is when its old letters
-- are compared with the new. It keeps them and writes one row here per
-- such group, which the overview shows with a Confirm button; confirming
-- deletes that group's letters settled before settled_before (audited) and
-- the row. Each purge writes the rows anew: a group that stopped growing
-- is purged as usual, and its row goes. One row per group, a handful.
CREATE TABLE purge_holds (
    fingerprint    text        PRIMARY KEY,
    task           text        NOT NULL,
    letters        bigint      NOT NULL,
    settled_before timestamptz NOT NULL,
    held_at        timestamptz NOT NULL
);

-- +goose Down
DROP TABLE purge_holds;
DROP TABLE task_timings;
DROP FUNCTION timing_histogram_add(bigint[], bigint[]);
