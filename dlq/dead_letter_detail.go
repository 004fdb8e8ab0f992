package dlq

import (
	"context"
	"fmt"

	"github.com/lib/pq"

	"github.com/redrive/redrive/mask"
)

// Caps on what one letter's detail returns. A traceback of a recursion gone
// wrong can be megabytes; nobody reads past the first few hundred KiB, and
// a page or API answer of several MB helps no one at 3 a.m.
const (
	// TracebackCap is the most characters of the final traceback returned.
	TracebackCap = 256 << 10
	// AttemptTracebackCap is the most characters of each attempt's own
	// traceback in the history.
	AttemptTracebackCap = 16 << 10
	maxLaterLetters     = 50
)

// DeadLetterDetail is one letter with everything the detail page shows.
type DeadLetterDetail struct {
	DeadLetter
	// TracebackLen is the full traceback's length in characters; when it
	// exceeds TracebackCap, Traceback holds only the first TracebackCap,
	// followed by mask.TruncatedMark.
	TracebackLen int `db:"traceback_len" json:"traceback_length"`
	// LaterLetters are the letters that replays of this one produced: each
	// has replay_of = this letter's id.
	LaterLetters []int64 `db:"-" json:"later_letters"`
}

// TracebackTruncated reports whether Traceback was cut at TracebackCap.
//
// It compares with the cap, not with Traceback, which masking shortens.
func (d DeadLetterDetail) TracebackTruncated() bool { return d.TracebackLen > TracebackCap }

// getDeadLetterSQL caps the traceback, and each attempt's traceback in the
// history, in the database, so a huge one never leaves Postgres whole. A
// history (json, its text as stored: 00101_letters.sql) shorter than the cap
// as a whole has no attempt to cut, and goes out as it is stored, without
// taking it apart. The letters its replays produced come in the same
// statement: one round trip per page view. A cut text ends in
// mask.TruncatedMark, as the worker's own cuts do: the reader
// sees that it goes on, and masking hides a secret the cut split in two
// (the part before the cut would otherwise show).
const getDeadLetterSQL = `
SELECT id, job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	left(traceback, $2) || CASE WHEN length(traceback) > $2 THEN $5 ELSE '' END AS traceback, length(traceback) AS traceback_len,
	attempts, max_attempts, reason, fingerprint, worker_version, enqueued_at, failed_at,
	replay_of, replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason, status,
	CASE WHEN octet_length(history::text) <= $3 THEN history ELSE
	(SELECT coalesce(jsonb_agg(CASE WHEN length(e->>'traceback') > $3
			THEN jsonb_set(e, '{traceback}', to_jsonb(left(e->>'traceback', $3) || $5))
			ELSE e END ORDER BY ord), '[]'::jsonb)::json
	 FROM jsonb_array_elements(history::jsonb) WITH ORDINALITY AS h(e, ord)) END AS history,
	ARRAY(SELECT l.id FROM dead_letters l WHERE l.replay_of = d.id ORDER BY l.id LIMIT $4) AS later_letters
FROM dead_letters d WHERE id = $1`

// GetDeadLetter returns one letter with its (capped) traceback, history and
// lineage, or ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (DeadLetterDetail, error) {
	var row struct {
		DeadLetterDetail
		Later pq.Int64Array `db:"later_letters"`
	}
	if err := s.db.GetContext(ctx, &row, getDeadLetterSQL, id, TracebackCap, AttemptTracebackCap, maxLaterLetters, mask.TruncatedMark); err != nil {
		return DeadLetterDetail{}, fmt.Errorf("get dead letter %d: %w", id, translate(err))
	}
	d := row.DeadLetterDetail
	if len(row.Later) > 0 {
		d.LaterLetters = row.Later
	}
	return d, nil
}
