// Package sources is the store's room for the sources of letters other
// than Redrive's own queue: the sources the operator configured and their
// state, and the letters they send (Ingest), each kept with its identity
// in its source so that the same failure sent twice is one letter.
package sources

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/grouping"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
)

// Store reads and writes the sources and the letters they send.
type Store struct {
	db *sqlx.DB
	// groups names the error group of each letter sent, as the worker's
	// dead-lettering does.
	groups *groups.Store
}

// New returns the room's store on a handle from postgres.Open; groups
// groups the letters it takes in.
func New(db *sqlx.DB, groups *groups.Store) *Store { return &Store{db: db, groups: groups} }

// ErrUnknownSource is returned for a letter sent to a source the operator
// has not configured.
var ErrUnknownSource = errors.New("unknown source")

// Configure records the sources the operator configured (REDRIVE_SOURCES),
// adding the new ones; a source keeps its state and its letters across
// restarts. A name configured before as another kind is refused: its
// letters came from elsewhere.
func (s *Store) Configure(ctx context.Context, sources []dlq.Source) error {
	for _, src := range sources {
		var kind dlq.SourceKind
		// The replay endpoint is the configuration's: the console started
		// last names it (consoles of one deployment share theirs).
		err := s.db.GetContext(ctx, &kind, `
			INSERT INTO sources (name, kind, replay_url) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET kind = sources.kind, replay_url = EXCLUDED.replay_url
			RETURNING kind`, src.Name, src.Kind, src.ReplayURL)
		if err != nil {
			return fmt.Errorf("configure source %s: %w", src.Name, postgres.Translate(err))
		}
		if kind != src.Kind {
			return dlq.Errorf(dlq.EConflict, "source %s is configured as %s, but its letters came as %s: name the new one differently",
				src.Name, src.Kind, kind)
		}
	}
	return nil
}

// Sources lists every source with its state and how many of its letters
// are kept and pending, Redrive's own first (its counts are every letter
// no other source sent). The pending counts are kept by triggers
// (source_counts, migrations/00112_source_counts.sql); the letters are
// counted, one entry of letter_sources per letter (about 15 ms for
// 100,000), which suits the sources page and the API, not a page that
// refreshes itself: the overview reads SourcesPending.
func (s *Store) Sources(ctx context.Context) ([]dlq.Source, error) {
	var out []dlq.Source
	if err := s.db.SelectContext(ctx, &out, `
		WITH theirs AS (
			SELECT source, count(*) AS letters FROM letter_sources GROUP BY source
		), everyone AS (
			SELECT coalesce(sum(n), 0)::bigint AS letters,
				coalesce(sum(n) FILTER (WHERE status = 'pending'), 0)::bigint AS pending
			FROM dead_letter_counts
		)
		SELECT s.name, s.kind, s.imported, s.last_import_at, s.created_at, s.checked_at, s.last_error, s.last_error_at, s.replay_url,
			(SELECT count(*) FROM source_replays r WHERE r.source = s.name AND r.state IN ('waiting', 'sending')) AS replays_waiting,
			(SELECT r.problem FROM source_replays r WHERE r.source = s.name AND r.state IN ('waiting', 'sending') AND r.problem IS NOT NULL
			 ORDER BY r.run_at DESC LIMIT 1) AS replay_problem,
			CASE WHEN s.name = $1 THEN e.letters - (SELECT coalesce(sum(letters), 0) FROM theirs) ELSE coalesce(t.letters, 0) END AS letters,
			CASE WHEN s.name = $1 THEN e.pending - (SELECT coalesce(sum(pending), 0) FROM source_counts) ELSE coalesce(c.pending, 0) END AS pending
		FROM sources s CROSS JOIN everyone e
		LEFT JOIN theirs t ON t.source = s.name
		LEFT JOIN source_counts c ON c.source = s.name
		ORDER BY s.name <> $1, s.name`, dlq.RedriveSource); err != nil {
		return nil, fmt.Errorf("sources: %w", postgres.Translate(err))
	}
	return out, nil
}

// SourcesPending lists every source with its state and its pending
// letters, Redrive's own first, from the kept counts alone: what the
// overview reads on every refresh, a few rows whatever the number of
// letters (0.15 ms at a million letters, against 130-190 ms to count them
// as Sources did). Letters is not counted.
func (s *Store) SourcesPending(ctx context.Context) ([]dlq.Source, error) {
	var out []dlq.Source
	if err := s.db.SelectContext(ctx, &out, `
		SELECT s.name, s.kind, s.imported, s.last_import_at, s.created_at, s.checked_at, s.last_error, s.last_error_at, s.replay_url,
			CASE WHEN s.name = $1
				THEN (SELECT coalesce(sum(n), 0) FROM dead_letter_counts WHERE status = 'pending')
					- (SELECT coalesce(sum(pending), 0) FROM source_counts)
				ELSE coalesce(c.pending, 0) END::bigint AS pending
		FROM sources s LEFT JOIN source_counts c ON c.source = s.name
		ORDER BY s.name <> $1, s.name`, dlq.RedriveSource); err != nil {
		return nil, fmt.Errorf("sources pending: %w", postgres.Translate(err))
	}
	return out, nil
}

// SourceHealth lists every source's state without counting its letters,
// with the replays waiting to be sent to it (a range of the due index):
// what /metrics reads at each scrape, one row per source.
func (s *Store) SourceHealth(ctx context.Context) ([]dlq.Source, error) {
	var out []dlq.Source
	if err := s.db.SelectContext(ctx, &out, `
		SELECT name, kind, imported, last_import_at, created_at, checked_at, last_error, last_error_at, replay_url,
			(SELECT count(*) FROM source_replays r WHERE r.source = s.name AND r.state IN ('waiting', 'sending')) AS replays_waiting
		FROM sources s ORDER BY name`); err != nil {
		return nil, fmt.Errorf("source health: %w", postgres.Translate(err))
	}
	return out, nil
}

// ingestSQL writes the letters of w that their source has not sent before,
// in one statement: each claims its identity in letter_sources first (a
// letter sent twice, or twice in one batch, claims it once), and only the
// letters that claimed one are written. Their ids, and their job ids (a
// letter from elsewhere has no job here; the id keeps the jobs' and the
// letters' numbering apart), were drawn from the sequences beforehand.
var ingestSQL = `
WITH w AS (
	SELECT * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::text[], $10::text[], $11::text[], $12::int[], $13::int[], $14::text[], $15::text[], $16::text[],
		$17::text[]::timestamptz[], $18::text[]::timestamptz[], $19::text[], $20::bigint[], $23::text[])
	AS w(id, job_id, external_id, task, queue, args, kwargs, error_class, error_message, traceback, attempts,
		max_attempts, history, reason, fingerprint, enqueued_at, failed_at, details, replay_of, template)
),
templates AS (` + letterpack.InsertTemplatesSQL("$21", "$22") + `),
claimed AS (
	INSERT INTO letter_sources (dead_letter_id, source, external_id, details)
	SELECT id, $1, external_id, details::jsonb FROM w
	ON CONFLICT (source, external_id) DO NOTHING
	RETURNING dead_letter_id
),
written AS (
	INSERT INTO dead_letter_records (id, job_id, queue, task, args, kwargs, error_class, error_message, traceback,
		traceback_template, attempts, max_attempts, history, reason, fingerprint, enqueued_at, failed_at, replay_of)
	OVERRIDING SYSTEM VALUE
	SELECT id, job_id, queue, task, args::jsonb, kwargs::jsonb, error_class, error_message, traceback,
		` + letterpack.HashSQL("template") + `, attempts, max_attempts, history::json, reason, fingerprint, enqueued_at, failed_at, nullif(replay_of, 0)
	FROM w WHERE id IN (SELECT dead_letter_id FROM claimed)
	ORDER BY failed_at, id
	RETURNING id
),
counted AS (
	UPDATE sources SET imported = imported + (SELECT count(*) FROM written), last_import_at = now()
	WHERE name = $1 AND EXISTS (SELECT 1 FROM written)
)
SELECT l.external_id, l.dead_letter_id, l.dead_letter_id IN (SELECT id FROM written) AS created
FROM w JOIN letter_sources l ON l.source = $1 AND l.external_id = w.external_id
UNION ALL
SELECT w.external_id, w.id, true FROM w WHERE w.id IN (SELECT id FROM written)`

// Ingest takes in letters that source sent, already normalised
// (dlq.IngestLetter.Normalise): each is grouped as the worker groups its
// own, and written unless the source sent its external id before. It
// returns, in the order sent, each letter's id and whether it is new.
func (s *Store) Ingest(ctx context.Context, source string, letters []dlq.IngestLetter) ([]dlq.IngestResult, error) {
	if err := s.checkHTTPSource(ctx, source); err != nil {
		return nil, err
	}
	if err := s.checkReplayOf(ctx, source, letters); err != nil {
		return nil, err
	}
	return s.ingest(ctx, s.db, source, letters)
}

// checkReplayOf refuses a letter that names as the one it replays a letter
// that is not its source's: a source speaks for its own letters only.
func (s *Store) checkReplayOf(ctx context.Context, source string, letters []dlq.IngestLetter) error {
	var named []int64
	for _, l := range letters {
		if l.ReplayOf != 0 {
			named = append(named, l.ReplayOf)
		}
	}
	if len(named) == 0 {
		return nil
	}
	var theirs []int64
	if err := s.db.SelectContext(ctx, &theirs, `SELECT dead_letter_id FROM letter_sources WHERE source = $1 AND dead_letter_id = ANY($2)`,
		source, pq.Array(named)); err != nil {
		return fmt.Errorf("letters replayed: %w", err)
	}
	problems := map[string]string{}
	for i, l := range letters {
		if l.ReplayOf != 0 && !slices.Contains(theirs, l.ReplayOf) {
			problems[fmt.Sprintf("letters[%d].replay_of", i)] = fmt.Sprintf("%d is not a letter of %s", l.ReplayOf, source)
		}
	}
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: problems}
	}
	return nil
}

// ingest writes letters of source with q, as Ingest says.
func (s *Store) ingest(ctx context.Context, q sqlx.QueryerContext, source string, letters []dlq.IngestLetter) ([]dlq.IngestResult, error) {
	if len(letters) == 0 {
		return nil, nil
	}
	args, err := s.ingestArgs(ctx, source, letters)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ExternalID string `db:"external_id"`
		ID         int64  `db:"dead_letter_id"`
		Created    bool   `db:"created"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, ingestSQL, args...); err != nil {
		return nil, fmt.Errorf("ingest letters of %s: %w", source, postgres.Translate(err))
	}
	// A letter written by this statement is not yet visible to its own
	// read of letter_sources: the union's second half names it.
	byID := make(map[string]dlq.IngestResult, len(rows))
	for _, r := range rows {
		if prev, ok := byID[r.ExternalID]; !ok || r.Created && !prev.Created {
			byID[r.ExternalID] = dlq.IngestResult{ExternalID: r.ExternalID, ID: r.ID, Created: r.Created}
		}
	}
	out := make([]dlq.IngestResult, len(letters))
	seen := make(map[string]bool, len(letters))
	for i, l := range letters {
		r, ok := byID[l.ExternalID]
		if !ok {
			return nil, fmt.Errorf("ingest letters of %s: letter %q was neither written nor found", source, l.ExternalID)
		}
		if seen[l.ExternalID] {
			r.Created = false // the same id twice in one batch: one letter, made by the first
		}
		seen[l.ExternalID] = true
		out[i] = r
	}
	return out, nil
}

// checkHTTPSource refuses a source that is not configured, or that is not
// one that sends its letters over HTTP.
func (s *Store) checkHTTPSource(ctx context.Context, source string) error {
	var kind dlq.SourceKind
	err := s.db.GetContext(ctx, &kind, `SELECT kind FROM sources WHERE name = $1`, source)
	switch err := postgres.Translate(err); {
	case errors.Is(err, dlq.ErrNotFound):
		return &dlq.ValidationError{Fields: map[string]string{"source": fmt.Sprintf(
			"%q is not a configured source: the operator names the sources a console takes letters from (REDRIVE_SOURCES)", dlq.ClipRunes(source, 40))}}
	case err != nil:
		return fmt.Errorf("source %s: %w", source, err)
	case !kind.SendsOverHTTP():
		return &dlq.ValidationError{Fields: map[string]string{"source": fmt.Sprintf(
			"%s is Redrive's own queue: its letters come from its worker, not over HTTP", source)}}
	}
	return nil
}

// ingestRows are the letters of a batch as ingestSQL's parameters, a
// column each.
type ingestRows struct {
	externalID, task, queue, args, kwargs, errorClass, message, traceback []string
	history, reason, fingerprint, enqueuedAt, failedAt                    []string
	attempts, maxAttempts                                                 []int64
	details                                                               []sql.NullString
	replayOf                                                              []int64
	// template names each traceback's template (traceback then holds its
	// values), and packed holds the templates.
	template []string
	packed   letterpack.Batch
}

// add appends one letter, its group and its history as JSON.
func (r *ingestRows) add(l dlq.IngestLetter, fingerprint string, history []byte) {
	r.externalID = append(r.externalID, l.ExternalID)
	r.task, r.queue = append(r.task, l.Task), append(r.queue, l.Queue)
	r.args, r.kwargs = append(r.args, string(l.Args)), append(r.kwargs, string(l.Kwargs))
	r.errorClass, r.message = append(r.errorClass, l.ErrorClass), append(r.message, l.Message)
	traceback, template := r.packed.Add(l.Traceback, l.Message)
	r.traceback, r.template, r.history = append(r.traceback, traceback), append(r.template, template), append(r.history, string(history))
	r.reason, r.fingerprint = append(r.reason, string(l.Reason)), append(r.fingerprint, fingerprint)
	r.enqueuedAt = append(r.enqueuedAt, l.EnqueuedAt.UTC().Format(time.RFC3339Nano))
	r.failedAt = append(r.failedAt, l.FailedAt.UTC().Format(time.RFC3339Nano))
	r.attempts, r.maxAttempts = append(r.attempts, int64(l.Attempts)), append(r.maxAttempts, int64(l.MaxAttempts))
	r.details = append(r.details, sql.NullString{String: string(l.Details), Valid: len(l.Details) > 0})
	r.replayOf = append(r.replayOf, l.ReplayOf)
}

// ingestArgs groups each letter and draws its ids, and returns the
// parameters of ingestSQL.
func (s *Store) ingestArgs(ctx context.Context, source string, letters []dlq.IngestLetter) ([]any, error) {
	var letterIDs, jobIDs []int64
	if err := s.db.QueryRowxContext(ctx, `SELECT ARRAY(SELECT nextval(`+postgres.LettersSequenceSQL+`) FROM generate_series(1, $1)),
		ARRAY(SELECT nextval(`+postgres.JobsSequenceSQL+`) FROM generate_series(1, $1))`, len(letters)).
		Scan((*pq.Int64Array)(&letterIDs), (*pq.Int64Array)(&jobIDs)); err != nil {
		return nil, fmt.Errorf("ingest letters of %s: draw ids: %w", source, postgres.Translate(err))
	}
	var r ingestRows
	for _, l := range letters {
		fp, err := s.groups.GroupLetter(ctx, grouping.Letter{Task: l.Task, Class: l.ErrorClass, Message: l.Message, Traceback: l.Traceback})
		if err != nil {
			return nil, fmt.Errorf("ingest letters of %s: group %q: %w", source, l.ExternalID, err)
		}
		history, err := l.History.AppendJSON(nil)
		if err != nil {
			return nil, fmt.Errorf("ingest letters of %s: history of %q: %w", source, l.ExternalID, err)
		}
		r.add(l, fp, history)
	}
	// A group merged while the batch was grouped is named by its survivor.
	r.fingerprint = s.groups.Resolve(r.fingerprint)
	return []any{source, pq.Array(letterIDs), pq.Array(jobIDs), pq.Array(r.externalID), pq.Array(r.task), pq.Array(r.queue),
		pq.Array(r.args), pq.Array(r.kwargs), pq.Array(r.errorClass), pq.Array(r.message), pq.Array(r.traceback),
		pq.Array(r.attempts), pq.Array(r.maxAttempts), pq.Array(r.history), pq.Array(r.reason), pq.Array(r.fingerprint),
		pq.Array(r.enqueuedAt), pq.Array(r.failedAt), pq.Array(r.details), pq.Array(r.replayOf),
		pq.Array(r.packed.Hashes), pq.Array(r.packed.Templates), pq.Array(r.template)}, nil
}
