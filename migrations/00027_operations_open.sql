-- +goose NO TRANSACTION

-- The operations still in flight, for the banner every console page shows
-- and for the bulk confirmation's overlap warning: "which operations are
-- not finished?". finished_at is set exactly when an operation reaches a
-- state whose Finished() is true (dlq.OperationState), whatever the names
-- of the states in between, so this index answers the question without
-- the list of open states written into SQL. It holds only the open
-- operations (a handful), however long the history grows.
--
-- CONCURRENTLY, hence NO TRANSACTION; a build that failed half way leaves
-- an invalid index, so it is dropped first and the migration can be rerun.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS operations_open_idx;
CREATE INDEX CONCURRENTLY operations_open_idx ON operations (id) WHERE finished_at IS NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS operations_open_idx;
