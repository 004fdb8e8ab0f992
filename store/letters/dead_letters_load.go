package letters

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
	"golang.org/x/sync/errgroup"
)

// loadSettingsSQL gives a bulk load's transaction the memory it wants: the
// new rows an AFTER ... REFERENCING NEW TABLE trigger receives, and the
// letters and texts of an indexing batch, stay off temporary files. The
// new rows are whole letters, uncompressed: under 256 MB every seed batch
// of 100,000 spilled them to a temporary file of about 280 MB and read it
// back (2.8 GB for a million, 4% of the seed's backend time waiting on the
// file); under 512 MB none does. The memory is taken only as rows come.
const loadSettingsSQL = `SET LOCAL work_mem = '512MB'`

// reserveLetterIDsSQL draws $1 letter ids and $1 job ids from the two
// identity sequences in one round trip: COPY returns nothing, so a loaded
// letter's ids are known before it is written, and its outcome can be
// written without reading the letter back. nextval never hands out an id
// twice, so no letter or job written later collides with a loaded one.
// (The letter's id costs no more than the identity default would.)
const reserveLetterIDsSQL = `
SELECT ARRAY(SELECT nextval(` + postgres.LettersSequenceSQL + `) FROM generate_series(1, $1)),
	ARRAY(SELECT nextval(` + postgres.JobsSequenceSQL + `) FROM generate_series(1, $1))`

// copyDeadLettersSQL names the columns LoadDeadLetters writes; replay_of
// is never set on a loaded letter. Every letter is written pending (the
// insert trigger writes its pending row); loadOutcomesSQL then gives the
// replayed and discarded ones their outcome. A load of settled letters
// only writes none pending (loadSettledSQL, insertOutcomesSQL).
const copyDeadLettersSQL = `COPY dead_letter_records (id, job_id, queue, task, args, kwargs, idempotency_key,
	error_class, error_message, traceback, traceback_template, attempts, max_attempts, history, reason, fingerprint, worker_version,
	enqueued_at, failed_at) FROM STDIN`

// loadedOutcomeRows are the outcomes a load passes (loadedOutcomes.args),
// as rows o; times travel as text (lib/pq has no array of nullable times).
const loadedOutcomeRows = `unnest($1::bigint[], $2::text[]::timestamptz[], $3::text[], $4::text[],
	$5::text[]::timestamptz[], $6::text[], $7::text[]::timestamptz[], $8::text[], $9::text[])
	AS o(id, failed_at, task, queue, replayed_at, replayed_by, discarded_at, discarded_by, discard_reason)`

// insertLoadedOutcomes writes outcomes from rows o; a replayed letter's job
// id is drawn from the jobs' sequence.
const insertLoadedOutcomes = `
INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, replayed_at, replayed_by,
	replay_job_id, discarded_at, discarded_by, discard_reason)
SELECT failed_at, id, task, queue, replayed_at, replayed_by,
	CASE WHEN replayed_at IS NOT NULL THEN nextval(` + postgres.JobsSequenceSQL + `) END,
	discarded_at, discarded_by, discard_reason`

// loadOutcomesSQL settles loaded letters as a replay or a discard does:
// their pending rows go and their outcomes are written.
const loadOutcomesSQL = `
WITH o AS (SELECT * FROM ` + loadedOutcomeRows + `),
taken AS (
	DELETE FROM pending_dead_letters p WHERE p.id IN (SELECT id FROM o) RETURNING p.id
)` + insertLoadedOutcomes + `
FROM o WHERE id IN (SELECT id FROM taken) ORDER BY failed_at, id`

// loadSettledSQL marks a load's transaction as one of settled letters
// only (LoadSettledDeadLetters): the letters' insert trigger writes no
// pending rows and counts nothing pending (00101_letters.sql).
const loadSettledSQL = `SET LOCAL redrive.load_settled = 'on'`

// insertOutcomesSQL writes the outcomes of settled letters that were never
// pending (LoadSettledDeadLetters): loadOutcomesSQL without the pending
// rows to take.
const insertOutcomesSQL = insertLoadedOutcomes + `
FROM ` + loadedOutcomeRows + `
ORDER BY failed_at, id`

// loadedOutcomes collects the outcomes of a load's settled letters, as
// the columns of loadOutcomesSQL.
type loadedOutcomes struct {
	ids                                                                          []int64
	failedAt, task, queue, replayedAt, replayedBy, discardedAt, discardedBy, why []sql.NullString
}

func (o *loadedOutcomes) add(id int64, l dlq.DeadLetter) {
	str, at := nullString, nullTimeText
	o.ids = append(o.ids, id)
	o.failedAt, o.task, o.queue = append(o.failedAt, at(&l.FailedAt)), append(o.task, str(&l.Task)), append(o.queue, str(&l.Queue))
	o.replayedAt, o.replayedBy = append(o.replayedAt, at(l.ReplayedAt)), append(o.replayedBy, str(l.ReplayedBy))
	o.discardedAt, o.discardedBy = append(o.discardedAt, at(l.DiscardedAt)), append(o.discardedBy, str(l.DiscardedBy))
	o.why = append(o.why, str(l.DiscardReason))
}

func nullString(s *string) sql.NullString {
	if s == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

// nullTimeText is t as text that Postgres reads back to the microsecond.
func nullTimeText(t *time.Time) sql.NullString {
	if t == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: t.Format(time.RFC3339Nano), Valid: true}
}

func (o *loadedOutcomes) args() []any {
	return []any{pq.Array(o.ids), pq.Array(o.failedAt), pq.Array(o.task), pq.Array(o.queue), pq.Array(o.replayedAt),
		pq.Array(o.replayedBy), pq.Array(o.discardedAt), pq.Array(o.discardedBy), pq.Array(o.why)}
}

// LoadDeadLetters writes n letters, letter(0) to letter(n-1) in that order,
// with COPY in one transaction, and returns how many it wrote (n, or 0 when
// it fails). It is for bulk loads (`redrive seed`): the letters are written
// as given, without the worker's checks. Each letter's ID is drawn from the
// letters' id sequence, its JobID, and the ReplayJobID of one with a
// ReplayedAt, from the jobs'; ReplayOf and Status are ignored. letter is called once per
// row as COPY streams, so a large load never holds its letters in memory.
//
// The search rows are not built here: call IndexLoadedDeadLetters once the
// loads are done, which builds them in large batches.
func (s *Store) LoadDeadLetters(ctx context.Context, n int, letter func(i int) dlq.DeadLetter) (int, error) {
	return s.loadDeadLetters(ctx, n, letter, false)
}

// LoadSettledDeadLetters is LoadDeadLetters for letters that are all
// replayed or discarded, for a bulk load that can tell them apart: they go
// in settled, with no pending row written only to be deleted (about a
// tenth of a seed's time, when 30% of its letters are settled). A letter
// that is neither fails the load, and nothing of it stays.
func (s *Store) LoadSettledDeadLetters(ctx context.Context, n int, letter func(i int) dlq.DeadLetter) (int, error) {
	return s.loadDeadLetters(ctx, n, letter, true)
}

// loadDeadLetters is LoadDeadLetters, or LoadSettledDeadLetters when
// settled is true.
func (s *Store) loadDeadLetters(ctx context.Context, n int, letter func(i int) dlq.DeadLetter, settled bool) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("load dead letters: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, loadSettingsSQL); err != nil {
		return 0, fmt.Errorf("load dead letters: %w", err)
	}
	outcomesSQL := loadOutcomesSQL
	if settled {
		if _, err := tx.ExecContext(ctx, loadSettledSQL); err != nil {
			return 0, fmt.Errorf("load dead letters: %w", err)
		}
		outcomesSQL = insertOutcomesSQL
	}
	var letterIDs, jobIDs []int64
	if err := tx.QueryRowContext(ctx, reserveLetterIDsSQL, n).Scan(pq.Array(&letterIDs), pq.Array(&jobIDs)); err != nil {
		return 0, fmt.Errorf("load dead letters: reserve ids: %w", postgres.Translate(err))
	}
	stmt, err := tx.PrepareContext(ctx, copyDeadLettersSQL)
	if err != nil {
		return 0, fmt.Errorf("load dead letters: copy: %w", postgres.Translate(err))
	}
	defer stmt.Close()
	var outcomes loadedOutcomes
	rows := postgres.NewCopyRows(stmt)
	var history []byte // one buffer for every letter's history JSON
	var templates letterpack.Batch
	for i := range n {
		l := letter(i)
		switch {
		case l.ReplayedAt != nil || l.DiscardedAt != nil:
			outcomes.add(letterIDs[i], l)
		case settled:
			return 0, &dlq.ValidationError{Fields: map[string]string{"letters": fmt.Sprintf(
				"letter %d of a load of settled letters is neither replayed nor discarded", i)}}
		}
		history, err = l.History.AppendJSON(history[:0])
		if err != nil {
			return 0, fmt.Errorf("load dead letters: history of letter %d: %w", i, err)
		}
		rows.Int(letterIDs[i])
		rows.Int(jobIDs[i])
		rows.Text(l.Queue)
		rows.Text(l.Task)
		rows.Bytes(l.Args)
		rows.Bytes(l.Kwargs)
		rows.OptionalText(l.IdempotencyKey)
		rows.Text(l.ErrorClass)
		rows.Text(l.ErrorMessage)
		traceback, template := templates.Add(l.Traceback, l.ErrorMessage)
		rows.Text(traceback)
		if template == "" {
			rows.Null()
		} else {
			rows.Text(`\x` + template) // bytea's hex input
		}
		rows.Int(int64(l.Attempts))
		rows.Int(int64(l.MaxAttempts))
		rows.Bytes(history)
		rows.Text(string(l.Reason))
		rows.Text(l.Fingerprint)
		rows.Text(l.WorkerVersion)
		rows.Time(l.EnqueuedAt)
		rows.Time(l.FailedAt)
		if err := rows.EndRow(ctx); err != nil {
			return 0, fmt.Errorf("load dead letters: copy: %w", postgres.Translate(err))
		}
	}
	if err := rows.Finish(ctx); err != nil {
		return 0, fmt.Errorf("load dead letters: copy: %w", postgres.Translate(err))
	}
	if _, err := tx.ExecContext(ctx, letterpack.InsertTemplatesSQL("$1", "$2"), pq.Array(templates.Hashes), pq.Array(templates.Templates)); err != nil {
		return 0, fmt.Errorf("load dead letters: traceback templates: %w", postgres.Translate(err))
	}
	if len(outcomes.ids) > 0 {
		if _, err := tx.ExecContext(ctx, outcomesSQL, outcomes.args()...); err != nil {
			return 0, fmt.Errorf("load dead letters: outcomes: %w", postgres.Translate(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("load dead letters: commit: %w", err)
	}
	return n, nil
}

// indexLoadBatch is how many letters one indexing statement of
// IndexLoadedDeadLetters takes.
//
// The pending list of the trigram index is left at its default size
// (gin_pending_list_limit, 4 MB). The seed used to raise it to 64 MB, and
// measured on 100,000 seeded letters that left the index several times
// the size for the same time: 95 MB built by the insert trigger under the
// 64 MB list, 287 MB by this statement under it, 39 MB by this statement
// under the default. A pending list's pages, once merged, are free only
// for later inserts, and a large list merges into half-empty pages.
const indexLoadBatch = 100_000

// IndexLoadedDeadLetters leaves the table as a console wants it after bulk
// loads. It builds the search rows of every queued letter
// (00102_search.sql), on connections connections at once, with the same statement as
// the console's indexer (a console running meanwhile indexes some itself;
// SKIP LOCKED keeps the two out of each other's way). Then it merges the
// GIN pending lists (or the next ordinary insert would pay for merging
// them, and every search would scan them) and refreshes the statistics, so
// the first queries are planned for the table as it now is, not as
// autovacuum last saw it. It returns how many letters it indexed.
func (s *Store) IndexLoadedDeadLetters(ctx context.Context, connections int) (int64, error) {
	n, err := s.indexLoadedSearch(ctx, max(connections, 1))
	if err != nil {
		return n, err
	}
	if _, err := s.db.ExecContext(ctx, cleanGINPendingSQL); err != nil {
		return n, fmt.Errorf("index loaded letters: merge GIN pending lists: %w", err)
	}
	if err := s.analyze(ctx, "dead_letter_records", "pending_dead_letters", "dead_letter_outcomes", "dead_letter_search"); err != nil {
		return n, fmt.Errorf("index loaded letters: %w", err)
	}
	return n, nil
}

// analyze runs ANALYZE on each of tables, each on a connection of its own
// at once: after a seed, the letters' own table takes about 1.8 s and the
// others half a second between them, which one connection would add up.
func (s *Store) analyze(ctx context.Context, tables ...string) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, table := range tables {
		g.Go(func() error {
			if _, err := s.db.ExecContext(ctx, `ANALYZE `+pq.QuoteIdentifier(table)); err != nil {
				return fmt.Errorf("analyze %s: %w", table, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// AnalyzeDeadLetters refreshes the planner's statistics of the letters
// after a bulk load whose search rows are left for later, so the first
// queries are planned for the table as it now is, not as autovacuum last
// saw it.
func (s *Store) AnalyzeDeadLetters(ctx context.Context) error {
	if err := s.analyze(ctx, "dead_letter_records", "pending_dead_letters", "dead_letter_outcomes"); err != nil {
		return fmt.Errorf("analyze dead letters: %w", err)
	}
	return nil
}

// indexLoadedSearch runs indexLoadedOnce on connections goroutines until
// the queue is empty or one fails, and returns how many letters they
// indexed.
func (s *Store) indexLoadedSearch(ctx context.Context, connections int) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		indexed  int64
		wg       sync.WaitGroup
	)
	for range connections {
		wg.Go(func() {
			for {
				n, err := s.indexLoadedOnce(ctx)
				mu.Lock()
				indexed += n
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				if err != nil || n < indexLoadBatch {
					return
				}
			}
		})
	}
	wg.Wait()
	return indexed, firstErr
}

// indexLoadedOnce indexes one batch in its own transaction, with the
// load's work_mem: the batch's letters and texts stay in memory.
func (s *Store) indexLoadedOnce(ctx context.Context) (int64, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("index loaded letters: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, loadSettingsSQL); err != nil {
		return 0, fmt.Errorf("index loaded letters: %w", err)
	}
	var n int64
	if err := tx.GetContext(ctx, &n, `SELECT dead_letter_search_index($1)`, indexLoadBatch); err != nil {
		return 0, fmt.Errorf("index loaded letters: %w", postgres.Translate(err))
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("index loaded letters: commit: %w", err)
	}
	return n, nil
}

// cleanGINPendingSQL merges the pending list of every GIN index on the
// letters and their search text, whichever migrations created them.
const cleanGINPendingSQL = `
SELECT gin_clean_pending_list(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am am ON am.oid = c.relam
WHERE i.indrelid IN ('dead_letter_records'::regclass, 'dead_letter_search'::regclass) AND am.amname = 'gin'`
