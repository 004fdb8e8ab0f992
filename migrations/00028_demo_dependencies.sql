-- The demo's simulated dependencies (`redrive dev`): while now() is in
-- [down_from, down_until) the dependency is down, and the demo tasks that
-- call it fail as a real client would. The demo incident schedules an
-- outage here; "Deploy the fix" ends it by moving down_until to now. The
-- state lives in a table, read by the tasks on every attempt, so a replay
-- succeeds because the dependency is back, not because the demo says so.
--
-- A new, small table that only the demo writes: nothing to lock on big
-- tables, and rerunnable.

-- +goose Up
CREATE TABLE IF NOT EXISTS demo_dependencies (
    name       text        PRIMARY KEY,
    down_from  timestamptz NOT NULL,
    down_until timestamptz NOT NULL,
    CONSTRAINT demo_dependencies_window CHECK (down_from <= down_until)
);

-- +goose Down
DROP TABLE IF EXISTS demo_dependencies;
