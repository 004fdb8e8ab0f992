-- Bulk operations on dead letters, and the one-time keys of actions.

-- +goose Up

-- An operation is durable: its row holds the bounded selection (explicit
-- ids, or a filter plus the highest letter id that matched when the
-- engineer confirmed), its pace and its progress. The runner takes its
-- letters batch by batch, oldest first on (failed_at, id), the list's order
-- read backwards, through whichever index matches the filter; each batch's
-- changes and the advance of its cursor commit together, so after a crash
-- the operation resumes after the cursor and never handles a letter twice.
--
-- A replay operation has two phases: enqueued (its letters handed to the
-- queue: state running, then settling) and settled (every replay job
-- succeeded, or died again as a new dead letter: done). canary_failed: a
-- canary replay died again, and the operation waits for release anyway or
-- cancel; auto_paused: the died-again guard stopped the releases.
CREATE TABLE operations (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text             NOT NULL,
    state           text             NOT NULL DEFAULT 'running',
    actor           text             NOT NULL,
    reason          text             NOT NULL DEFAULT '',
    ids             bigint[],
    filter          jsonb,
    max_id          bigint           NOT NULL,
    matched         bigint           NOT NULL,
    rate_per_second double precision,
    canary          integer          NOT NULL DEFAULT 0,
    -- The id half of the position; cursor_failed_at is the other.
    cursor_id       bigint           NOT NULL DEFAULT 0,
    done_count      bigint           NOT NULL DEFAULT 0,
    skipped         bigint           NOT NULL DEFAULT 0,
    pace_origin     timestamptz,
    audit_event_id  bigint,
    error           text,
    created_at      timestamptz      NOT NULL DEFAULT now(),
    updated_at      timestamptz      NOT NULL DEFAULT now(),
    -- Set exactly when the operation reaches a state whose Finished() is
    -- true (dlq.OperationState).
    finished_at     timestamptz,
    -- The failed_at half of the position. NULL: the operation has not
    -- started, and starts from the oldest letter.
    cursor_failed_at timestamptz,
    -- The same position for each lane when an operation's batches run two
    -- at a time (dlq.RunOperationLane): {"0": {...}, "1": ...}.
    lane_cursors    jsonb,
    -- The died-again guard's setting and verdict, the canary's verdict,
    -- when the letters were all enqueued, and who stopped following.
    died_again_percent real,
    guard_verdict   text,
    canary_verdict  text,
    enqueued_at     timestamptz,
    stopped_following_by text,
    -- The replays' outcomes so far, which the page, the API and the CLI
    -- read: the runner counts them once a second per operation it follows
    -- (jobs_operation_state_idx), so ten people polling cost one count.
    replays         jsonb,

    CONSTRAINT operations_kind_valid CHECK (kind IN ('replay', 'discard')),
    CONSTRAINT operations_state_valid CHECK (state IN
        ('running', 'canary', 'canary_failed', 'auto_paused', 'settling', 'done', 'cancelled', 'failed')),
    CONSTRAINT operations_selection CHECK ((ids IS NULL) <> (filter IS NULL)),
    CONSTRAINT operations_rate_valid CHECK (rate_per_second IS NULL OR rate_per_second > 0),
    CONSTRAINT operations_canary_valid CHECK (canary >= 0),
    CONSTRAINT operations_died_again_percent_valid CHECK
        (died_again_percent IS NULL OR (died_again_percent > 0 AND died_again_percent < 100))
);
-- The runner's question: "which operations still have work?"
CREATE INDEX operations_active_idx ON operations (id) WHERE state = 'running';
-- The operations still in flight, for the banner every console page shows
-- and for the bulk confirmation's overlap warning: by finished_at, so that
-- the list of open states is not written into SQL. It holds only the open
-- operations (a handful), however long the history grows.
CREATE INDEX operations_open_idx ON operations (id) WHERE finished_at IS NULL;

-- One-time keys of submitted action forms and of the API's Idempotency-Key
-- header: a resubmitted form, a double click or a retry finds its key here
-- and gets the first result back instead of acting again.
CREATE TABLE action_keys (
    key          text        PRIMARY KEY,
    actor        text        NOT NULL,
    action       text        NOT NULL,
    status       integer     NOT NULL,
    result       jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    -- A digest of what the first request asked for (its action, target and
    -- body, dlq.requestHash): a later request with the same key but another
    -- digest is refused (422) instead of being given the first answer, so
    -- that discarding letter 8 with the key that discarded letter 7 does not
    -- answer "discarded" while 8 is still pending. A key without a digest
    -- keeps the weaker check (same actor, same action).
    request_hash text
);

-- +goose Down
DROP TABLE action_keys;
DROP TABLE operations;
