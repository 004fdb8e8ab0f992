-- Error groups as the grouper (package grouping) learns them, and the
-- merges and splits operators make of them.
--
-- A group's id is the letters' fingerprint. The grouper learns each
-- failure's template online and names a group when it first meets it; what
-- it has learned is kept here, so that every worker, the seed and the
-- regrouping share it. The group's counts are error_groups, a summary of
-- the letters (00101_letters.sql).

-- +goose Up

-- One row per live group: its key (task, error class, the place it failed)
-- and its template's tokens, '<*>' where its letters differ.
CREATE TABLE error_templates (
    id          text        PRIMARY KEY,
    task        text        NOT NULL,
    error_class text        NOT NULL,
    place       text        NOT NULL,
    tokens      text[]      NOT NULL,
    -- The positions that may never become a variable.
    fixed       boolean[]   NOT NULL,
    -- span: the template matches messages of other lengths too.
    span        boolean     NOT NULL DEFAULT false,
    -- Orders templates by creation: of two merged groups the older survives.
    seq         bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    -- Counts an operator's changes to the template: a merge that widened
    -- it, a split that fixed one of its words. Learning never changes it,
    -- and the store keeps what a worker learned only from the revision the
    -- worker read (grouping.ErrStale): a worker that has not yet re-read
    -- the key cannot undo the operator's change with its old copy.
    rev         bigint      NOT NULL DEFAULT 0,
    CONSTRAINT error_templates_shape CHECK (cardinality(tokens) = cardinality(fixed))
);
CREATE INDEX error_templates_key_idx ON error_templates (task, error_class, place);
CREATE SEQUENCE error_templates_seq;

-- A group that turned out to be another's (its template widened to cover
-- both, or an operator merged them) is gone, and its id means the
-- survivor's from then on: old links, audit entries and operations that
-- name it redirect. into_id is always a live group (chains are shortened
-- when a survivor is merged in turn). A merge an operator made can be
-- undone (split off), which deletes its row.
CREATE TABLE error_group_merges (
    from_id   text        PRIMARY KEY,
    into_id   text        NOT NULL,
    -- 'system' for a merge the grouper made; an operator's name otherwise.
    actor     text        NOT NULL,
    merged_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT error_group_merges_not_self CHECK (from_id <> into_id)
);
CREATE INDEX error_group_merges_into_idx ON error_group_merges (into_id);

-- One row per group an operator's split kept or made. The group `source`
-- was split at the template position `position`; the group `id` holds the
-- letters whose word there was `value` (`letters` of them then). A repeated
-- split answers what the first one did from it, and it names the positions
-- an operator fixed, which a merge of the split groups may widen again; a
-- word the tokenizer fixed (a quoted key, a status code) never is.
CREATE TABLE error_group_splits (
    id       text        NOT NULL,
    position integer     NOT NULL,
    value    text        NOT NULL,
    source   text        NOT NULL,
    letters  bigint      NOT NULL,
    actor    text        NOT NULL,
    split_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (id, position)
);
CREATE INDEX error_group_splits_source_idx ON error_group_splits (source, position);

-- error_group_move(from, survivor, who) moves every letter of the groups
-- `from` into `survivor` and keeps the summaries true, in its caller's
-- transaction: letters and pending rows relabelled, error_groups and
-- dead_letter_inflow rows folded into the survivor's. The letters' own
-- triggers fire on INSERT and DELETE only, so the relabelling does not
-- count anything twice.
--
-- An operator's merge keeps the merged groups' templates. The grouper
-- keeps matching them, so letters like the merged ones still go to the
-- survivor through error_group_merges even when the survivor's template
-- could not widen to cover them (another place, another length), and
-- "split off" can restore them. A merge the grouper learned (actor
-- 'system') deletes them, and never overrides an operator's.
-- +goose StatementBegin
CREATE FUNCTION error_group_move(from_ids text[], survivor text, who text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    moved bigint;
BEGIN
    from_ids := array(SELECT DISTINCT f FROM unnest(from_ids) f WHERE f <> survivor ORDER BY f);
    IF cardinality(from_ids) = 0 THEN
        RETURN 0;
    END IF;
    -- Lock the summary rows in a fixed order, as the insert trigger does,
    -- so that a worker dead-lettering into one of them waits for the move.
    PERFORM 1 FROM error_groups WHERE fingerprint = ANY (from_ids || survivor) ORDER BY fingerprint FOR UPDATE;

    UPDATE dead_letter_records SET fingerprint = survivor WHERE fingerprint = ANY (from_ids);
    GET DIAGNOSTICS moved = ROW_COUNT;
    UPDATE pending_dead_letters SET fingerprint = survivor WHERE fingerprint = ANY (from_ids);

    WITH gone AS (
        DELETE FROM error_groups WHERE fingerprint = ANY (from_ids)
        RETURNING task, error_class, sample_message, total, pending, first_seen, last_seen
    ), folded AS (
        SELECT min(task) AS task, min(error_class) AS error_class,
               (array_agg(sample_message ORDER BY last_seen DESC))[1] AS sample_message,
               sum(total) AS total, sum(pending) AS pending, min(first_seen) AS first_seen, max(last_seen) AS last_seen
        FROM gone HAVING count(*) > 0
    )
    INSERT INTO error_groups AS g (fingerprint, task, error_class, sample_message, total, pending, first_seen, last_seen)
    SELECT survivor, task, error_class, sample_message, total, pending, first_seen, last_seen FROM folded
    ON CONFLICT (fingerprint) DO UPDATE SET
        total = g.total + EXCLUDED.total,
        pending = g.pending + EXCLUDED.pending,
        first_seen = least(g.first_seen, EXCLUDED.first_seen),
        last_seen = greatest(g.last_seen, EXCLUDED.last_seen),
        sample_message = CASE WHEN EXCLUDED.last_seen > g.last_seen THEN EXCLUDED.sample_message ELSE g.sample_message END;

    WITH gone AS (
        DELETE FROM dead_letter_inflow WHERE fingerprint = ANY (from_ids) RETURNING hour, queue, task, n
    )
    INSERT INTO dead_letter_inflow AS i (fingerprint, hour, queue, task, n)
    SELECT survivor, hour, queue, min(task), sum(n) FROM gone GROUP BY hour, queue ORDER BY hour, queue
    ON CONFLICT (fingerprint, hour, queue) DO UPDATE SET n = i.n + EXCLUDED.n;

    DELETE FROM notification_spikes WHERE fingerprint = ANY (from_ids);
    UPDATE error_group_merges SET into_id = survivor WHERE into_id = ANY (from_ids);
    DELETE FROM error_group_merges WHERE from_id = survivor;
    -- The grouper may find a group an operator merged covered by another
    -- template: the operator's choice stands.
    INSERT INTO error_group_merges (from_id, into_id, actor)
    SELECT f, survivor, who FROM unnest(from_ids) f
    ON CONFLICT (from_id) DO UPDATE SET into_id = EXCLUDED.into_id, actor = EXCLUDED.actor, merged_at = now()
    WHERE error_group_merges.actor = 'system' OR EXCLUDED.actor <> 'system';
    DELETE FROM error_templates t USING error_group_merges m
    WHERE t.id = m.from_id AND m.from_id = ANY (from_ids) AND m.actor = 'system';
    RETURN moved;
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION error_group_move(text[], text, text);
DROP TABLE error_group_splits;
DROP TABLE error_group_merges;
DROP SEQUENCE error_templates_seq;
DROP TABLE error_templates;
