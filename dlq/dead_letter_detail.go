package dlq

import (
	"context"
	"fmt"
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
	// exceeds TracebackCap, Traceback holds only the first TracebackCap.
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
// history, in the database, so a huge one never leaves Postgres whole.
const getDeadLetterSQL = `
SELECT id, job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	left(traceback, $2) AS traceback, length(traceback) AS traceback_len,
	attempts, max_attempts, reason, fingerprint, worker_version, enqueued_at, failed_at,
	replay_of, replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason, status,
	(SELECT coalesce(jsonb_agg(CASE WHEN length(e->>'traceback') > $3
			THEN jsonb_set(e, '{traceback}', to_jsonb(left(e->>'traceback', $3)))
			ELSE e END ORDER BY ord), '[]'::jsonb)
	 FROM jsonb_array_elements(history) WITH ORDINALITY AS h(e, ord)) AS history
FROM dead_letters WHERE id = $1`

const laterLettersSQL = `SELECT id FROM dead_letters WHERE replay_of = $1 ORDER BY id LIMIT $2`

// GetDeadLetter returns one letter with its (capped) traceback, history and
// lineage, or ErrNotFound.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (DeadLetterDetail, error) {
	var d DeadLetterDetail
	if err := s.db.GetContext(ctx, &d, getDeadLetterSQL, id, TracebackCap, AttemptTracebackCap); err != nil {
		return DeadLetterDetail{}, fmt.Errorf("get dead letter %d: %w", id, translate(err))
	}
	if err := s.db.SelectContext(ctx, &d.LaterLetters, laterLettersSQL, id, maxLaterLetters); err != nil {
		return DeadLetterDetail{}, fmt.Errorf("get dead letter %d: later letters: %w", id, translate(err))
	}
	return d, nil
}
