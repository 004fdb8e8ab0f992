-- Qualifiers on a letter's arguments in the search box and the API
-- (kwargs.customer_id:cus_9, args.0:ORD-1, kwargs.amount>100): package
-- argquery reads them, letters.argQueryWhere asks them of the letters.

-- +goose Up

-- An equality is asked as containment (kwargs @> '{"customer_id":
-- "cus_9"}') beside the exact comparison at its path, and these indexes
-- answer the containment. jsonb_path_ops holds one hash per value with its
-- path, so it serves @> and nothing else (no key-exists ?), at a third of
-- the default jsonb_ops' size. A rare value (one customer's letters among
-- a million) is a bitmap of a few index pages, 1-9 ms a page of the list;
-- a common one (currency EUR, a quarter of the letters) is planned as the
-- walk of the list's failed_at index it always was, 2-3 ms. A range
-- (kwargs.amount>990) cannot use them: the store probes the index of
-- argument values for it first (dead_letter_arg_values, 00102_search.sql;
-- letters.ArgProbe), and walks in failed_at order only when the range
-- matches too many letters for the probe, so that the page fills soon.
--
-- Cost, measured on `redrive seed --dead-letters 1000000` (PostgreSQL 15):
-- 33 MB each per million letters (pg_relation_size), against 1,556 MB of
-- letters' heap and 2,034 MB with their other indexes; built in 3.3 s
-- each. Dead-lettering: EXPLAIN (ANALYZE, WAL) of one INSERT of 20,000
-- letters wrote 2.1 WAL records and 780 bytes more a letter (2,665 ->
-- 3,444 bytes), the GIN pending list taking the entries (fastupdate, the
-- default) until VACUUM or a full list (gin_pending_list_limit, 4 MB)
-- merges them. One index on jsonb_build_object('args', args, 'kwargs',
-- kwargs) would be the same size and one insertion, but needs an
-- IMMUTABLE wrapper function, which PostgreSQL calls per letter without
-- inlining it: building it took 21.7 s against 6.6 s for these two, a
-- cost every dead-lettering statement would pay.
CREATE INDEX dead_letters_kwargs_idx ON dead_letter_records USING gin (kwargs jsonb_path_ops);
CREATE INDEX dead_letters_args_idx ON dead_letter_records USING gin (args jsonb_path_ops);

-- Whether any of the keys a query names is one the masking policy hides
-- (a key containing one of mask_policy.keys, in any case, as package mask
-- decides). The pages show such a value to nobody but through an audited
-- reveal of one letter, so a qualifier by it must match nothing, whoever
-- asks and however (a stored operation resumed after the policy changed,
-- a caller that skipped the console's check): every query with
-- qualifiers is gated on this, evaluated once per statement.
CREATE FUNCTION dead_letter_keys_masked(named text[]) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT 1 FROM mask_policy p, unnest(p.keys) pattern, unnest(named) k WHERE strpos(lower(k), pattern) > 0);

-- +goose Down
DROP FUNCTION dead_letter_keys_masked(text[]);
DROP INDEX dead_letters_args_idx;
DROP INDEX dead_letters_kwargs_idx;
