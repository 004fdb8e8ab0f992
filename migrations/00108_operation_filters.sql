-- An operation keeps its filter as the filter's own JSON (dlq.Filter):
-- {"task": "billing.charge", "status": "pending", "since": "2026-…Z"}.
-- Until now it kept the query string's values, {"task": ["billing.charge"]},
-- read back through the list's query-string parser. This rewrites the
-- operations of a database migrated before, in the new form: each value is
-- the first of its list; a missing status meant pending and "all" (or
-- "any") every status, which the new form says by no status; several
-- groups in one comma-separated fingerprint become fingerprints. Times
-- were stored pinned (RFC 3339) and stay as they are.
--
-- Audit entries keep the filter they were written with: they are links of
-- the hash chain, so the console reads both forms there.

-- +goose Up
UPDATE operations SET filter = jsonb_strip_nulls(jsonb_build_object(
    'task', filter->'task'->>0,
    'queue', filter->'queue'->>0,
    'reason', filter->'reason'->>0,
    'status', CASE WHEN NOT filter ? 'status' THEN 'pending'
                   WHEN filter->'status'->>0 IN ('all', 'any') THEN NULL
                   ELSE filter->'status'->>0 END,
    'error_class', filter->'error_class'->>0,
    'fingerprint', CASE WHEN strpos(filter->'fingerprint'->>0, ',') = 0 THEN filter->'fingerprint'->>0 END,
    'fingerprints', CASE WHEN strpos(filter->'fingerprint'->>0, ',') > 0
                         THEN to_jsonb(string_to_array(filter->'fingerprint'->>0, ',')) END,
    'q', filter->'q'->>0,
    'since', filter->'since'->>0,
    'until', filter->'until'->>0))
WHERE filter IS NOT NULL;

-- +goose Down
UPDATE operations SET filter = (
    SELECT coalesce(jsonb_object_agg(key, value), '{}')
    FROM (
        SELECT key, jsonb_build_array(value) AS value FROM jsonb_each(filter)
        WHERE key NOT IN ('status', 'fingerprints')
        UNION ALL
        SELECT 'fingerprint', jsonb_build_array(array_to_string(ARRAY(
            SELECT jsonb_array_elements_text(filter->'fingerprints')), ','))
        WHERE filter ? 'fingerprints'
        UNION ALL
        SELECT 'status', jsonb_build_array(coalesce(filter->>'status', 'all'))
        WHERE coalesce(filter->>'status', '') <> 'pending'
    ) kv)
WHERE filter IS NOT NULL;
