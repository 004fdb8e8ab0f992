-- +goose NO TRANSACTION

-- Free-text search matches only what the searcher may see.
--
-- 00007 built the search text from the error message and the raw args and
-- kwargs, so a viewer who saw `password: •••` could still find the letter
-- by its password, and recover a secret one character at a time by growing
-- the search term. The search text is now built from masked values, with
-- the same rules as the pages (dlq.Masker):
--
--   * a value under a key that contains one of the key patterns (any case,
--     any depth, inside arrays too) is replaced whole by "•••";
--   * in the error message, every string or number under such a key that
--     is at least 4 characters long is replaced by "•••" wherever it
--     appears (a decode error that quotes the payload, "card ending 7552");
--   * then every match of the extra patterns (REDRIVE_MASK_PATTERNS,
--     translated to PostgreSQL's regex syntax) is replaced too.
--
-- The patterns are process configuration of the console, but the search
-- text is written by triggers, in whichever process dead-letters the job.
-- So the policy lives here, in mask_policy (one row), which the console
-- writes at start (dlq.Store.ApplyMaskPolicy). Each search row records the
-- policy version it was built with; search reads only rows of the current
-- version, so after a change a row not yet rebuilt is missing from search
-- results for a while, never found by a value the new policy hides. The
-- console then rebuilds the stale rows in batches (`redrive search
-- rebuild` does the same by hand); inserts go on meanwhile.
--
-- The rows there are now were built with version 0, unmasked: search skips
-- them until the first rebuild. Nothing here rewrites a million rows, so
-- the migration is instant; adding a column with a constant default does
-- not rewrite the table.

-- +goose Up
BEGIN;
CREATE TABLE IF NOT EXISTS mask_policy (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    version    bigint      NOT NULL,
    -- Lower-case substrings of sensitive keys.
    keys       text[]      NOT NULL,
    -- Extra patterns, in PostgreSQL's syntax, and as the operator wrote
    -- them (Go's syntax), which is what the console compares.
    patterns   text[]      NOT NULL,
    written    text[]      NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- dlq.DefaultMaskKeys: letters written before any console started are
-- masked like the console's defaults.
INSERT INTO mask_policy (version, keys, patterns, written)
VALUES (1, ARRAY['password', 'secret', 'token', 'authorization', 'card', 'ssn'], '{}', '{}')
ON CONFLICT (id) DO NOTHING;

ALTER TABLE dead_letter_search ADD COLUMN IF NOT EXISTS policy_version bigint NOT NULL DEFAULT 0;

-- doc with every value under a sensitive key replaced by "•••". jsonb
-- prints a rebuilt value exactly as it printed the original, so what is
-- not masked reads (and is found) as before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_mask_jsonb(doc jsonb, keys text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE jsonb_typeof(doc)
    WHEN 'object' THEN (
        SELECT coalesce(jsonb_object_agg(e.key, CASE
            WHEN EXISTS (SELECT 1 FROM unnest(keys) p WHERE strpos(lower(e.key), p) > 0) THEN to_jsonb('•••'::text)
            ELSE redrive_mask_jsonb(e.value, keys) END), '{}'::jsonb)
        FROM jsonb_each(doc) e)
    WHEN 'array' THEN (
        SELECT coalesce(jsonb_agg(redrive_mask_jsonb(a.value, keys) ORDER BY a.n), '[]'::jsonb)
        FROM jsonb_array_elements(doc) WITH ORDINALITY a(value, n))
    ELSE doc END
$$;
-- +goose StatementEnd

-- The strings and numbers (as text) under sensitive keys, at any depth,
-- that are long enough to be recognised in an error message.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION redrive_masked_values(doc jsonb, keys text[]) RETURNS SETOF text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT leaf #>> '{}'
FROM jsonb_path_query(doc, 'strict $.** ? (@.type() == "object").keyvalue()') kv,
     jsonb_path_query(kv -> 'value', 'strict $.** ? (@.type() == "string" || @.type() == "number")') leaf
WHERE EXISTS (SELECT 1 FROM unnest(keys) p WHERE strpos(lower(kv ->> 'key'), p) > 0)
  AND char_length(leaf #>> '{}') >= 4
$$;
-- +goose StatementEnd

-- The search text of one letter under a policy. The cheap test first: a
-- key pattern that appears nowhere in the printed arguments cannot be in
-- a key (patterns hold nothing jsonb escapes: dlq refuses such patterns),
-- so most letters cost two strpos per pattern and no rebuilt JSON.
-- Replacements happen before the text is cut to 1,000 characters, so a
-- secret straddling the cut cannot leave its first half behind.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_masked_search_text(msg text, args jsonb, kwargs jsonb, keys text[], patterns text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    a text := args::text;
    k text := kwargs::text;
    secret text;
    pattern text;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(keys) p WHERE strpos(lower(a), p) > 0 OR strpos(lower(k), p) > 0) THEN
        -- Longest first: a value that contains another is replaced whole.
        FOR secret IN
            SELECT v FROM (SELECT redrive_masked_values(args, keys) UNION SELECT redrive_masked_values(kwargs, keys)) s(v)
            ORDER BY char_length(v) DESC, v
        LOOP
            msg := replace(msg, secret, '•••');
        END LOOP;
        a := redrive_mask_jsonb(args, keys)::text;
        k := redrive_mask_jsonb(kwargs, keys)::text;
    END IF;
    FOREACH pattern IN ARRAY patterns LOOP
        msg := regexp_replace(msg, pattern, '•••', 'g');
    END LOOP;
    RETURN left(msg, 1000) || ' ' || left(a, 1000) || ' ' || left(k, 1000);
END;
$$;
-- +goose StatementEnd

-- The policy is read once per statement: a batch of thousands of letters
-- pays for one primary-key lookup. No policy row (someone deleted it)
-- stamps version 0, which search skips: fail closed.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    INSERT INTO dead_letter_search (dead_letter_id, search_text, policy_version)
    SELECT id, dead_letter_masked_search_text(error_message, args, kwargs, pol.keys, coalesce(pol.patterns, '{}')),
           coalesce(pol.version, 0)
    FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pol mask_policy;
BEGIN
    SELECT * INTO pol FROM mask_policy;
    UPDATE dead_letter_search
    SET search_text = dead_letter_masked_search_text(NEW.error_message, NEW.args, NEW.kwargs, pol.keys, coalesce(pol.patterns, '{}')),
        policy_version = coalesce(pol.version, 0)
    WHERE dead_letter_id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- The unmasked text of 00007 is no longer used by anything.
DROP FUNCTION IF EXISTS dead_letter_search_text(text, jsonb, jsonb);
COMMIT;

-- +goose Down
BEGIN;
CREATE OR REPLACE FUNCTION dead_letter_search_text(error_message text, args jsonb, kwargs jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN left(error_message, 1000) || ' ' || left(args::text, 1000) || ' ' || left(kwargs::text, 1000);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO dead_letter_search (dead_letter_id, search_text)
    SELECT id, dead_letter_search_text(error_message, args, kwargs) FROM new_rows;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_search_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE dead_letter_search SET search_text = dead_letter_search_text(NEW.error_message, NEW.args, NEW.kwargs)
    WHERE dead_letter_id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

ALTER TABLE dead_letter_search DROP COLUMN IF EXISTS policy_version;
DROP FUNCTION IF EXISTS dead_letter_masked_search_text(text, jsonb, jsonb, text[], text[]);
DROP FUNCTION IF EXISTS redrive_masked_values(jsonb, text[]);
DROP FUNCTION IF EXISTS redrive_mask_jsonb(jsonb, text[]);
DROP TABLE IF EXISTS mask_policy;
COMMIT;

-- 00007's search answered from the unmasked text: give it back. Row locks
-- only, so dead-lettering goes on (new letters get 00007's text already).
UPDATE dead_letter_search s SET search_text = dead_letter_search_text(d.error_message, d.args, d.kwargs)
FROM dead_letters d
WHERE d.id = s.dead_letter_id AND s.search_text IS DISTINCT FROM dead_letter_search_text(d.error_message, d.args, d.kwargs);
