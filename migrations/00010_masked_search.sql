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

-- The search text of one letter under a policy.
--
-- Cost matters: this runs for every letter dead-lettered. The quick test
-- first: a key pattern that appears nowhere in the printed arguments
-- cannot be in a key (patterns hold nothing jsonb escapes: dlq refuses
-- such patterns), so most letters cost a few strpos and no JSON walk. The
-- walk, when a pattern does appear, is plpgsql simple expressions over
-- jsonb_path_query_array: no query per letter (each costs tens of us),
-- except a sort when a letter has several sensitive values. Measured on
-- 100,000 seeded letters (a quarter with a sensitive key), 24 us a letter
-- against 5 us for 00007's unmasked text; the trigram index entry the text
-- then gets costs ~200 us. (A recursive SQL function that rebuilt the
-- jsonb cost 1.5 ms a letter.)
--
-- Masking the printed JSON: jsonb prints every pair as "key": value, the
-- same inside a document as alone, and a quote inside a string is
-- escaped, so replacing the text of each sensitive pair by "key": "•••"
-- replaces exactly that pair (and any other pair of the same key and
-- value, equally sensitive). Longest first, so a sensitive object is
-- replaced whole before the pairs inside it, and "pin": 12 before "pin": 1.
--
-- In the message, every string or number under a sensitive key of 4 or
-- more characters is replaced, longest first, then byte order (what Go's
-- TextMask does), then each extra pattern. Replacements happen before the
-- text is cut to 1,000 characters, so a secret straddling the cut cannot
-- leave its first half behind.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION dead_letter_masked_search_text(msg text, args jsonb, kwargs jsonb, keys text[], patterns text[])
RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    a text := args::text;
    k text := kwargs::text;
    la text := lower(a);
    lk text := lower(k);
    hit boolean := false;
    key text;
    kv jsonb;
    kvs jsonb;
    leaves jsonb;
    j int;
    j2 int;
    v jsonb;
    n int;
    i int;
    pairs text[];
    masked text[];
    secrets text[] := '{}';
    pattern text;
BEGIN
    FOREACH key IN ARRAY keys LOOP
        IF strpos(la, key) > 0 OR strpos(lk, key) > 0 THEN
            hit := true;
            EXIT;
        END IF;
    END LOOP;
    IF hit THEN
        FOR n IN 1..2 LOOP
            pairs := '{}';
            masked := '{}';
            kvs := jsonb_path_query_array(CASE n WHEN 1 THEN args ELSE kwargs END,
                'strict $.** ? (@.type() == "object").keyvalue()');
            FOR j IN 0..jsonb_array_length(kvs) - 1 LOOP
                kv := kvs -> j;
                FOREACH key IN ARRAY keys LOOP
                    IF strpos(lower(kv ->> 'key'), key) > 0 THEN
                        v := kv -> 'value';
                        pairs := pairs || (to_jsonb(kv ->> 'key')::text || ': ' || v::text);
                        masked := masked || (to_jsonb(kv ->> 'key')::text || ': "•••"');
                        IF jsonb_typeof(v) IN ('string', 'number') THEN
                            secrets := secrets || (v #>> '{}');
                        ELSIF jsonb_typeof(v) IN ('object', 'array') THEN
                            leaves := jsonb_path_query_array(v, 'strict $.** ? (@.type() == "string" || @.type() == "number")');
                            FOR j2 IN 0..jsonb_array_length(leaves) - 1 LOOP
                                secrets := secrets || (leaves ->> j2);
                            END LOOP;
                        END IF;
                        EXIT;
                    END IF;
                END LOOP;
            END LOOP;
            IF cardinality(pairs) > 1 THEN
                SELECT array_agg(p ORDER BY char_length(p) DESC), array_agg(r ORDER BY char_length(p) DESC)
                INTO pairs, masked FROM unnest(pairs, masked) t(p, r);
            END IF;
            FOR i IN 1..coalesce(cardinality(pairs), 0) LOOP
                IF n = 1 THEN
                    a := replace(a, pairs[i], masked[i]);
                ELSE
                    k := replace(k, pairs[i], masked[i]);
                END IF;
            END LOOP;
        END LOOP;
        IF cardinality(secrets) > 1 THEN
            secrets := ARRAY(SELECT DISTINCT ON (char_length(s), s COLLATE "C") s FROM unnest(secrets) s
                ORDER BY char_length(s) DESC, s COLLATE "C");
        END IF;
        FOREACH key IN ARRAY secrets LOOP
            IF char_length(key) >= 4 THEN
                msg := replace(msg, key, '•••');
            END IF;
        END LOOP;
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
    SELECT id, dead_letter_masked_search_text(error_message, args, kwargs, coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
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
    SET search_text = dead_letter_masked_search_text(NEW.error_message, NEW.args, NEW.kwargs, coalesce(pol.keys, '{}'), coalesce(pol.patterns, '{}')),
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
DROP TABLE IF EXISTS mask_policy;
COMMIT;

-- 00007's search answered from the unmasked text: give it back. Row locks
-- only, so dead-lettering goes on (new letters get 00007's text already).
UPDATE dead_letter_search s SET search_text = dead_letter_search_text(d.error_message, d.args, d.kwargs)
FROM dead_letters d
WHERE d.id = s.dead_letter_id AND s.search_text IS DISTINCT FROM dead_letter_search_text(d.error_message, d.args, d.kwargs);
