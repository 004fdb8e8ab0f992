-- The demo's own tables, as an application's handlers own theirs: created
-- by `redrive dev` and `redrive worker --demo-tasks` (EnsureSchema), never
-- by `redrive migrate`, so a production database holds none of them. Each
-- statement is rerunnable.

-- Written by demo.apply_product_event to show a version-guarded write: an
-- event applies only when it is strictly newer than what is stored.
CREATE TABLE IF NOT EXISTS demo_products (
    id         text        PRIMARY KEY,
    version    bigint      NOT NULL,
    price      numeric     NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The demo's simulated dependencies: while now() is in [down_from,
-- down_until) the dependency is down, and the demo tasks that call it fail
-- as a real client would. The demo incident schedules an outage here;
-- "Deploy the fix" ends it by moving down_until to now. The state lives in
-- a table, read by the tasks on every attempt, so a replay succeeds because
-- the dependency is back, not because the demo says so.
CREATE TABLE IF NOT EXISTS demo_dependencies (
    name       text        PRIMARY KEY,
    down_from  timestamptz NOT NULL,
    down_until timestamptz NOT NULL,
    CONSTRAINT demo_dependencies_window CHECK (down_from <= down_until)
);
