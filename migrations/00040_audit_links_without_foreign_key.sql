-- A bulk batch's audit links have no foreign key to their audit entry.
--
-- audit_event_letters links each letter a bulk operation changed to the
-- entry that started it, one row per letter, written by the batch that
-- changed the letter. Its key to audit_events was checked row by row: a
-- bulk replay of 100,000 letters made 100,000 lookups of the same entry,
-- each taking a FOR KEY SHARE lock on it (two lanes sharing it turn that
-- lock into a MultiXact). EXPLAIN (ANALYZE) of one batch of 2,000 on a
-- million seeded letters: 17-21 ms of the key's trigger in 125-220 ms.
--
-- The key guarded nothing the schema does not already: audit entries are
-- append-only (no UPDATE, DELETE or TRUNCATE: audit_append_only), so an
-- entry never goes away under its links, and the batch takes the id from
-- its operation's row, written in the transaction that wrote the entry.

-- +goose Up
ALTER TABLE audit_event_letters DROP CONSTRAINT audit_event_letters_audit_event_id_fkey;

-- +goose Down
ALTER TABLE audit_event_letters ADD CONSTRAINT audit_event_letters_audit_event_id_fkey
    FOREIGN KEY (audit_event_id) REFERENCES audit_events (id);
