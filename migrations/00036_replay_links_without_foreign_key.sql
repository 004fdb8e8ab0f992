-- A letter's link to the letter it replays has no foreign key.
--
-- dead_letter_records.replay_of names the letter whose replay failed again
-- (the worker copies it from jobs.replay_of), and its foreign key cleared
-- it when that letter was purged (ON DELETE SET NULL). Checking the key
-- costs every inserted letter, linked or not: Postgres queues an AFTER ROW
-- event for each, and firing it fetches the new row back from the heap
-- before it finds replay_of NULL. Seeding a million letters under perf,
-- those fetches were about 6 % of the server's CPU (heap_fetch under
-- AfterTriggerEndQuery, outside every PL/pgSQL trigger); a worker's
-- dead-lettering batch pays the same per letter. A linked letter's check
-- also locks the replayed letter (FOR KEY SHARE), a write to its row.
--
-- jobs.replay_of lost its own foreign key for the same reason (migration
-- 00033). The letters' delete trigger now does what ON DELETE SET NULL
-- did, once per statement: the letters that replay a deleted letter lose
-- the link. A letter written while the letter it replays is being purged
-- may keep a link to a letter that is gone (the key would have failed its
-- insert instead); the detail page then says that letter was not found.
-- Purges take letters settled days ago, whose replays ran long before.

-- +goose Up
ALTER TABLE dead_letter_records DROP CONSTRAINT dead_letters_replay_of_fkey;

-- +goose StatementBegin
CREATE FUNCTION dead_letters_unlink_replays() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- dead_letters_replay_of_idx finds the links; letters deleted by the
    -- same statement are gone already and are not touched.
    UPDATE dead_letter_records SET replay_of = NULL WHERE replay_of IN (SELECT id FROM old_rows);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER dead_letters_unlink_replays AFTER DELETE ON dead_letter_records
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dead_letters_unlink_replays();

-- +goose Down
DROP TRIGGER dead_letters_unlink_replays ON dead_letter_records;
DROP FUNCTION dead_letters_unlink_replays();
UPDATE dead_letter_records r SET replay_of = NULL
WHERE replay_of IS NOT NULL AND NOT EXISTS (SELECT 1 FROM dead_letter_records d WHERE d.id = r.replay_of);
ALTER TABLE dead_letter_records ADD CONSTRAINT dead_letters_replay_of_fkey
    FOREIGN KEY (replay_of) REFERENCES dead_letter_records (id) ON DELETE SET NULL;
