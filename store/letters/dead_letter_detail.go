package letters

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/letterpack"
	"github.com/redrive/redrive/store/postgres"
)

// getDeadLetterSQL caps the traceback, and each attempt's traceback in the
// history, in the database, so a huge one never leaves Postgres whole. A
// history (json, its text as stored: 00101_letters.sql) shorter than the cap
// as a whole has no attempt to cut, and goes out as it is stored, without
// taking it apart. The letters its replays produced, and its source, come
// in the same statement: one round trip per page view. A cut text ends in
// mask.TruncatedMark, as the worker's own cuts do: the reader
// sees that it goes on, and masking hides a secret the cut split in two
// (the part before the cut would otherwise show).
//
// Most of this statement's time is planning it (a lookup by primary key
// executes in tens of microseconds), so it names as few relations as it
// can: the later letters come from dead_letter_records, not the view (which
// joins the outcomes again), and the source is one scalar subquery rather
// than two outer joins, which would leave the planner more join orders to
// weigh (EXPLAIN ANALYZE: about 0.1 ms of a 0.4 ms statement). A packed
// traceback (00123) no longer than the cap comes as its template's hash
// and its values, and is put together in Go from the template, which the
// Store keeps (tracebackTemplates): in SQL that was half of this
// statement's time. Any other, stored whole or longer, is put together
// here, once, in a subquery the planner may not flatten into the three
// uses of it, and cut here.
const getDeadLetterSQL = `
SELECT d.id, d.job_id, d.queue, d.task, d.args, d.kwargs, d.idempotency_key, d.error_class, d.error_message,
	coalesce(left(t.traceback, $2) || CASE WHEN length(t.traceback) > $2 THEN $5 ELSE '' END, '') AS traceback,
	coalesce(length(t.traceback), 0) AS traceback_len,
	CASE WHEN t.packed THEN r.traceback_template END AS traceback_template,
	CASE WHEN t.packed THEN r.traceback END AS traceback_values,
	d.attempts, d.max_attempts, d.reason, d.fingerprint, d.worker_version, d.enqueued_at, d.failed_at,
	d.replay_of, d.replayed_at, d.replayed_by, d.replay_job_id, d.discarded_at, d.discarded_by, d.discard_reason, d.status,
	CASE WHEN octet_length(d.history::text) <= $3 THEN d.history ELSE
	(SELECT coalesce(jsonb_agg(CASE WHEN length(e->>'traceback') > $3
			THEN jsonb_set(e, '{traceback}', to_jsonb(left(e->>'traceback', $3) || $5))
			ELSE e END ORDER BY ord), '[]'::jsonb)::json
	 FROM jsonb_array_elements(d.history::jsonb) WITH ORDINALITY AS h(e, ord)) END AS history,
	ARRAY(SELECT l.id FROM dead_letter_records l WHERE l.replay_of = d.id ORDER BY l.id LIMIT $4) AS later_letters,
	(SELECT ARRAY[s.source, s.external_id, k.kind, coalesce(s.details::text, ''), (k.replay_url IS NOT NULL)::text]
	 FROM letter_sources s JOIN sources k ON k.name = s.source
	 WHERE s.dead_letter_id = d.id) AS letter_source
FROM dead_letters d
JOIN dead_letter_records r ON r.id = d.id
CROSS JOIN LATERAL (SELECT p.packed, CASE WHEN NOT p.packed THEN d.traceback END AS traceback
	FROM (SELECT r.traceback_template IS NOT NULL AND octet_length(r.traceback) <= $2 AS packed) p OFFSET 0) t
WHERE d.id = $1`

// GetDeadLetter returns one letter with its (capped) traceback, history and
// lineage, or ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error) {
	var row struct {
		dlq.DeadLetterDetail
		Later  pq.Int64Array  `db:"later_letters"`
		Source pq.StringArray `db:"letter_source"` // name, external id, kind, details, has a replay URL; NULL for Redrive's own
		// A packed traceback the cap does not cut: Traceback is empty.
		Template []byte  `db:"traceback_template"`
		Values   *string `db:"traceback_values"`
	}
	if err := s.db.GetContext(ctx, &row, getDeadLetterSQL, postgres.Prepared, id, dlq.TracebackCap, dlq.AttemptTracebackCap, dlq.MaxLaterLetters, mask.TruncatedMark); err != nil {
		return dlq.DeadLetterDetail{}, fmt.Errorf("get dead letter %d: %w", id, postgres.Translate(err))
	}
	d := row.DeadLetterDetail
	if row.Template != nil && row.Values != nil {
		template, err := s.templates.get(ctx, s.db, row.Template)
		if err != nil {
			return dlq.DeadLetterDetail{}, fmt.Errorf("get dead letter %d: %w", id, err)
		}
		d.Traceback, d.TracebackLen = capTraceback(letterpack.Unpack(template, *row.Values, d.ErrorMessage))
	}
	if len(row.Later) > 0 {
		d.LaterLetters = row.Later
	}
	d.Source, d.SourceKind = dlq.RedriveSource, dlq.SourceKindRedrive
	if len(row.Source) == 5 {
		d.Source, d.ExternalID, d.SourceKind = row.Source[0], &row.Source[1], dlq.SourceKind(row.Source[2])
		d.SourceReplayURL = row.Source[4] == "true"
		if row.Source[3] != "" {
			d.SourceDetails = json.RawMessage(row.Source[3])
		}
	}
	return d, nil
}
