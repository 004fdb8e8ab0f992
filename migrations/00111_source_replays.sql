-- Replays that run in another system (a River queue, an HTTP source's
-- replay endpoint) are sent from here, in the background, after the bulk
-- operation that chose them has committed: a batch cannot call River (or
-- a webhook) inside its transaction and take it back if the batch rolls
-- back. The batch claims the letter, records it replayed, and queues its
-- replay in source_replays at its paced time; the console's runner sends
-- the due ones (SendSourceReplays) and follows them in the source until
-- they succeed or die again (FollowSourceReplays). A replay the source
-- refuses (River: the job was retried since, or a unique job holds its key)
-- makes the letter pending again, keeps why, and is reported per letter;
-- it is never counted as replayed.
--
-- problem is why the last send failed or was refused; answer is what the
-- source said when it took the replay (an HTTP endpoint's status and body).
--
-- A row's state:
--   waiting     queued, to be sent at run_at (its paced time, or after a
--               failed send the next try's)
--   sending     taken by a runner until leased_until: a runner that died
--               mid-send leaves it to be sent again, as resumed
--   sent        the source has it (job_id there), not yet run
--   running     the source is running it
--   succeeded   it ran and succeeded
--   died_again  it failed for good again (a new letter, replay_of this one)
--   gone        the source no longer has the job, so how it ended is unknown
--   refused     the source would not run it (problem says why)

-- +goose Up
CREATE TABLE source_replays (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dead_letter_id bigint      NOT NULL REFERENCES dead_letter_records (id) ON DELETE CASCADE,
    operation_id   bigint      REFERENCES operations (id) ON DELETE SET NULL,
    source         text        NOT NULL REFERENCES sources (name),
    external_id    text        NOT NULL,
    state          text        NOT NULL DEFAULT 'waiting',
    run_at         timestamptz NOT NULL,
    leased_until   timestamptz,
    tries          integer     NOT NULL DEFAULT 0,
    job_id         bigint,
    problem        text,
    answer         text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    sent_at        timestamptz,
    settled_at     timestamptz,
    CONSTRAINT source_replays_state_valid CHECK (state IN
        ('waiting', 'sending', 'sent', 'running', 'succeeded', 'died_again', 'gone', 'refused')),
    CONSTRAINT source_replays_settled CHECK ((settled_at IS NOT NULL) = (state IN ('succeeded', 'died_again', 'gone', 'refused')))
);
-- What is due to be sent, per source, soonest first.
CREATE INDEX source_replays_due_idx ON source_replays (source, run_at) WHERE state IN ('waiting', 'sending');
-- What is to be followed in its source.
CREATE INDEX source_replays_followed_idx ON source_replays (source, id) WHERE state IN ('sent', 'running');
-- An operation's replays by state: its counts, its canary and its guard.
CREATE INDEX source_replays_operation_idx ON source_replays (operation_id, state) WHERE operation_id IS NOT NULL;
CREATE INDEX source_replays_letter_idx ON source_replays (dead_letter_id);

-- A replay in another system has its job id there only once it is sent
-- (and an HTTP source's may never have one): a replayed letter's job id may
-- be unknown, but a job id still means a replay.
ALTER TABLE dead_letter_outcomes DROP CONSTRAINT dead_letter_outcomes_replay_consistent;
ALTER TABLE dead_letter_outcomes ADD CONSTRAINT dead_letter_outcomes_replay_consistent
    CHECK (replay_job_id IS NULL OR replayed_at IS NOT NULL);

-- An HTTP source may name where its replays are posted (a signed webhook);
-- without it, its letters cannot be replayed from the console.
ALTER TABLE sources ADD COLUMN replay_url text;

-- +goose Down
-- A replayed letter without a job id would break the old constraint:
-- going back is refused while one exists.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM dead_letter_outcomes WHERE replayed_at IS NOT NULL AND replay_job_id IS NULL) THEN
        RAISE EXCEPTION 'letters were replayed in another system without a job id: purge them before migrating down';
    END IF;
END
$$;
-- +goose StatementEnd
ALTER TABLE sources DROP COLUMN replay_url;
ALTER TABLE dead_letter_outcomes DROP CONSTRAINT dead_letter_outcomes_replay_consistent;
ALTER TABLE dead_letter_outcomes ADD CONSTRAINT dead_letter_outcomes_replay_consistent
    CHECK ((replayed_at IS NULL) = (replay_job_id IS NULL));
DROP TABLE source_replays;
