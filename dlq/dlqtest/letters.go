package dlqtest

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// Letter describes a dead letter for a test to insert. Zero values take
// defaults, so a test names only what it is about (River's testfactory).
type Letter struct {
	JobID       int64 // default: one more than the largest so far
	Task        string
	Queue       string
	Args        string // JSON array
	Kwargs      string // JSON object
	ErrorClass  string
	Message     string
	Traceback   string
	Attempts    int
	MaxAttempts int
	Reason      string
	Fingerprint string // default: derived from task, class and message
	// History is the jsonb array of attempts; default: one "dead" attempt.
	History       string
	WorkerVersion string
	EnqueuedAt    time.Time
	FailedAt      time.Time // default: now
	ReplayOf      *int64
	// Status "replayed" or "discarded" sets the matching columns.
	Status      string
	ReplayJobID int64
}

const insertLetterSQL = `
INSERT INTO dead_letters (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
	attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at, replay_of,
	replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason)
VALUES (coalesce($1, (SELECT coalesce(max(job_id), 0) + 1 FROM dead_letters)), $2, $3, $4, $5, $6, $7, $8,
	$9, $10, $11, $12, $13, $14, $15, $16, $17,
	CASE WHEN $18 = 'replayed' THEN $16::timestamptz + interval '1 minute' END,
	CASE WHEN $18 = 'replayed' THEN 'test' END,
	CASE WHEN $18 = 'replayed' THEN $19::bigint END,
	CASE WHEN $18 = 'discarded' THEN $16::timestamptz + interval '1 minute' END,
	CASE WHEN $18 = 'discarded' THEN 'test' END,
	CASE WHEN $18 = 'discarded' THEN 'not needed' END)
RETURNING id`

// InsertDeadLetter inserts one letter and returns its id.
func InsertDeadLetter(t testing.TB, db *sqlx.DB, l Letter) int64 {
	t.Helper()
	l.Task = cmp.Or(l.Task, "billing.charge")
	l.Queue = cmp.Or(l.Queue, "default")
	l.Args = cmp.Or(l.Args, `[1]`)
	l.Kwargs = cmp.Or(l.Kwargs, `{}`)
	l.ErrorClass = cmp.Or(l.ErrorClass, "RuntimeError")
	l.Message = cmp.Or(l.Message, "boom")
	l.Attempts = cmp.Or(l.Attempts, 5)
	l.MaxAttempts = cmp.Or(l.MaxAttempts, 5)
	l.Reason = cmp.Or(l.Reason, "exhausted")
	l.Fingerprint = cmp.Or(l.Fingerprint, fmt.Sprintf("%x", []byte(l.Task+"/"+l.ErrorClass))[:16])
	if l.FailedAt.IsZero() {
		l.FailedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	if l.EnqueuedAt.IsZero() {
		l.EnqueuedAt = l.FailedAt.Add(-time.Minute)
	}
	if l.History == "" {
		l.History = fmt.Sprintf(`[{"attempt": %d, "at": %q, "host": "w1", "version": "v1", "class": %q, "message": %q, "outcome": "dead", "duration_ms": 120}]`,
			l.Attempts, l.FailedAt.Format(time.RFC3339Nano), l.ErrorClass, l.Message)
	}
	var jobID *int64
	if l.JobID != 0 {
		jobID = &l.JobID
	}
	replayJob := cmp.Or(l.ReplayJobID, 999_999)
	var id int64
	err := db.Get(&id, insertLetterSQL, jobID, l.Queue, l.Task, l.Args, l.Kwargs, l.ErrorClass, l.Message, l.Traceback,
		l.Attempts, l.MaxAttempts, l.History, l.Reason, l.Fingerprint, l.WorkerVersion, l.EnqueuedAt, l.FailedAt,
		l.ReplayOf, l.Status, replayJob)
	if err != nil {
		t.Fatalf("insert dead letter: %v", err)
	}
	if err := IndexSearch(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return id
}

// IndexSearch builds the search rows of the letters written since the last
// call, as the console's background indexer would a moment later
// (migration 00016), so that a test can search for a letter it just wrote.
func IndexSearch(ctx context.Context, db *sqlx.DB) error {
	if _, err := db.ExecContext(ctx, `SELECT dead_letter_search_index(2147483647)`); err != nil {
		return fmt.Errorf("index search: %w", err)
	}
	return nil
}

// seedLettersSQL makes $1 letters in one set-based statement, shaped like a
// real fleet's: a dozen tasks of skewed popularity, a few hundred distinct
// failures of which a handful dominate, 80% pending, spread over 30 days
// before $2 with whole-second failure times (so ties on failed_at occur),
// and a unique order number in each message and args for rare searches.
const seedLettersSQL = `
INSERT INTO dead_letters (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
	attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at,
	replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason)
SELECT $3::bigint + g, x.queue, x.task,
	jsonb_build_array($3::bigint + g, 'customer-' || (g % 50000)),
	jsonb_build_object('order_id', 'ord_' || ($3::bigint + g), 'region', (ARRAY['eu', 'us', 'ap'])[1 + g % 3]),
	x.class, x.message, 'Traceback (most recent call last):' || E'\n' ||
		'  File "/srv/app/' || replace(x.task, '.', '/') || '.py", line ' || (10 + x.kind) || ', in run' || E'\n' ||
		'    raise ' || x.class || E'\n' || x.class || ': ' || x.message,
	x.attempts, 5,
	jsonb_build_array(jsonb_build_object('attempt', x.attempts, 'at', x.failed_at, 'host', 'worker-' || (g % 7),
		'version', 'v1.4.' || (x.kind % 3), 'class', x.class, 'message', x.message, 'outcome', 'dead', 'duration_ms', g % 900)),
	x.reason, x.fingerprint, 'v1.4.' || (x.kind % 3), x.failed_at - interval '10 minutes', x.failed_at,
	CASE WHEN x.st = 'replayed' THEN x.failed_at + interval '1 hour' END,
	CASE WHEN x.st = 'replayed' THEN 'seed' END,
	CASE WHEN x.st = 'replayed' THEN $3::bigint + 2000000000 + g END,
	CASE WHEN x.st = 'discarded' THEN x.failed_at + interval '1 hour' END,
	CASE WHEN x.st = 'discarded' THEN 'seed' END,
	CASE WHEN x.st = 'discarded' THEN 'known issue' END
FROM generate_series(1, $1) g
CROSS JOIN LATERAL (SELECT random() AS t, random() AS k, random() AS age, random() AS st, g AS gg) r
CROSS JOIN LATERAL (
	SELECT (ARRAY['billing.charge', 'email.send', 'reports.generate', 'search.index', 'webhooks.deliver',
		'images.resize', 'orders.sync', 'crm.push', 'sms.send', 'ledger.post', 'exports.build',
		'inventory.reserve'])[1 + floor(12 * r.t * r.t)::int] AS task
) t0
CROSS JOIN LATERAL (
	SELECT floor(300 * r.k * r.k * r.k)::int AS kk
) kq
CROSS JOIN LATERAL (
	SELECT t0.task, kq.kk AS kind,
		CASE split_part(t0.task, '.', 1) WHEN 'billing' THEN 'payments' WHEN 'ledger' THEN 'payments'
			WHEN 'email' THEN 'email' WHEN 'sms' THEN 'email' WHEN 'reports' THEN 'bulk' WHEN 'exports' THEN 'bulk'
			ELSE 'default' END AS queue,
		(ARRAY['ConnectionError', 'TimeoutError', 'KeyError', 'ValueError', 'PaymentDeclined',
			'IntegrityError', 'HTTPError', 'PermissionError'])[1 + kq.kk % 8] AS class,
		(ARRAY['connection refused by db-', 'timed out after 30s talking to svc-', 'missing key field_',
			'invalid value for option_', 'card declined by issuer bank_', 'duplicate key in table_',
			'upstream answered 503 from host_', 'access denied to bucket_'])[1 + kq.kk % 8] || kq.kk
			|| ' (order ord_' || ($3::bigint + g) || ')' AS message,
		CASE WHEN kq.kk % 8 IN (2, 3, 4, 7) THEN 'permanent' WHEN kq.kk % 23 = 0 THEN 'lease_expired' ELSE 'exhausted' END AS reason,
		CASE WHEN kq.kk % 8 IN (2, 3, 4, 7) THEN 1 ELSE 5 END AS attempts,
		substr(md5(t0.task || '/' || kq.kk), 1, 16) AS fingerprint,
		date_trunc('second', $2::timestamptz - (r.age * interval '30 days')) AS failed_at,
		CASE WHEN r.st < 0.80 THEN 'pending' WHEN r.st < 0.95 THEN 'replayed' ELSE 'discarded' END AS st
) x`

// SeedDeadLetters inserts n realistic letters that failed in the 30 days
// before now, in statements of up to 100,000 rows, deterministically, then
// vacuums and analyses the table.
func SeedDeadLetters(ctx context.Context, db *sqlx.DB, n int, now time.Time) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT setseed(0.42)`); err != nil {
		return err
	}
	var base int64
	if err := tx.GetContext(ctx, &base, `SELECT coalesce(max(job_id), 0) FROM dead_letters`); err != nil {
		return err
	}
	for done := 0; done < n; {
		batch := min(100_000, n-done)
		if _, err := tx.ExecContext(ctx, seedLettersSQL, batch, now.UTC(), base+int64(done)); err != nil {
			return fmt.Errorf("seed dead letters: %w", err)
		}
		done += batch
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if err := IndexSearch(ctx, db); err != nil {
		return err
	}
	// As autovacuum would leave a table at rest: statistics for the planner
	// and a visibility map that lets index-only scans skip the heap.
	_, err = db.ExecContext(ctx, `VACUUM ANALYZE dead_letters, dead_letter_search`)
	return err
}
