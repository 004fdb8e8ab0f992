-- Celery as a source: a Celery app's workers send its failed tasks over
-- HTTP (integrations/celery) and, since Redrive cannot reach into their
-- broker, take their replays from Redrive themselves: they lease the due
-- ones (POST /api/v1/sources/{name}/replays/take) and publish each through
-- the app's own broker. A Celery replay may run with edited arguments,
-- kept on its row; the task it was published as is named by Celery's own
-- id, a string (job_ref).

-- +goose Up
ALTER TABLE sources DROP CONSTRAINT sources_kind_valid;
ALTER TABLE sources ADD CONSTRAINT sources_kind_valid CHECK (kind IN ('redrive', 'http', 'river', 'celery'));
ALTER TABLE source_replays
    ADD COLUMN args    jsonb,
    ADD COLUMN kwargs  jsonb,
    ADD COLUMN job_ref text;

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM sources WHERE kind = 'celery') THEN
        RAISE EXCEPTION 'a Celery source is configured: purge its letters and delete it from sources before migrating down';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE source_replays DROP COLUMN args, DROP COLUMN kwargs, DROP COLUMN job_ref;
ALTER TABLE sources DROP CONSTRAINT sources_kind_valid;
ALTER TABLE sources ADD CONSTRAINT sources_kind_valid CHECK (kind IN ('redrive', 'http', 'river'));
