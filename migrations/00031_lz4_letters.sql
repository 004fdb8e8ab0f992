-- A dead letter's traceback and attempt history are most of its bytes
-- (about 0.9 KB and 1.6 KB for the seed's letters), and PostgreSQL
-- compresses a row's large values with pglz before it stores them: in a
-- server-side COPY of 100,000 seeded letters, pglz_compress was the
-- largest single function in perf (13.5% of the backend's time). lz4 does
-- the same job several times faster, both ways: the same COPY took 12.6
-- and 13.4 s with lz4 against 14.5 and 15.8 s with pglz (alternating),
-- and a letter's page decompresses its traceback faster too.
--
-- SET COMPRESSION only changes how values written from now on are
-- compressed: it rewrites nothing and takes a moment. Existing values
-- stay pglz and read as before. lz4 is there only in a server built with
-- it (Debian's, the PGDG packages and the official images are); a server
-- without it keeps pglz.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE dead_letters
            ALTER COLUMN traceback SET COMPRESSION lz4,
            ALTER COLUMN history SET COMPRESSION lz4,
            ALTER COLUMN error_message SET COMPRESSION lz4,
            ALTER COLUMN args SET COMPRESSION lz4,
            ALTER COLUMN kwargs SET COMPRESSION lz4;
        ALTER TABLE jobs
            ALTER COLUMN errors SET COMPRESSION lz4,
            ALTER COLUMN args SET COMPRESSION lz4,
            ALTER COLUMN kwargs SET COMPRESSION lz4;
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE dead_letters
    ALTER COLUMN traceback SET COMPRESSION DEFAULT,
    ALTER COLUMN history SET COMPRESSION DEFAULT,
    ALTER COLUMN error_message SET COMPRESSION DEFAULT,
    ALTER COLUMN args SET COMPRESSION DEFAULT,
    ALTER COLUMN kwargs SET COMPRESSION DEFAULT;
ALTER TABLE jobs
    ALTER COLUMN errors SET COMPRESSION DEFAULT,
    ALTER COLUMN args SET COMPRESSION DEFAULT,
    ALTER COLUMN kwargs SET COMPRESSION DEFAULT;
