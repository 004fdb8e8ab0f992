package storetest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
)

// Letter describes a dead letter for a test to insert. Zero values take
// defaults, so a test names only what it is about (River's testfactory).
type Letter struct {
	JobID       int64 // default: the next of the jobs' ids, as a real letter's job has
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
INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
	attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at, replay_of)
VALUES (coalesce($1, nextval(pg_get_serial_sequence('jobs', 'id'))), $2, $3, $4, $5, $6, $7, $8,
	$9, $10, $11, $12, $13, $14, $15, $16, $17)
RETURNING id`

// Outcome is what Settle records for the letters it settles. Zero values
// take defaults.
type Outcome struct {
	Status string    // "replayed" or "discarded"
	At     time.Time // default: now
	By     string    // default: "test"
	Reason string    // a discard's; default: "not needed"
	// ReplayJobID is a replay's job; default: the letter's own id.
	ReplayJobID int64
}

// settleSQL settles letters as a replay or a discard does: their pending
// rows go and their outcomes are written (00101_letters.sql). %s is the
// condition on dead_letter_records; the outcome's values follow its
// arguments.
const settleSQL = `
WITH taken AS (
	DELETE FROM pending_dead_letters p WHERE p.id IN (SELECT id FROM dead_letter_records WHERE %s)
	RETURNING p.id, p.failed_at, p.task, p.queue
)
INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, replayed_at, replayed_by, replay_job_id,
	discarded_at, discarded_by, discard_reason)
SELECT failed_at, id, task, queue,
	CASE WHEN $%[2]d = 'replayed' THEN coalesce($%[3]d, now()) END,
	CASE WHEN $%[2]d = 'replayed' THEN $%[4]d END,
	CASE WHEN $%[2]d = 'replayed' THEN coalesce($%[5]d, id) END,
	CASE WHEN $%[2]d = 'discarded' THEN coalesce($%[3]d, now()) END,
	CASE WHEN $%[2]d = 'discarded' THEN $%[4]d END,
	CASE WHEN $%[2]d = 'discarded' THEN $%[6]d END
FROM taken`

// Settle marks the pending letters that where selects (a condition on
// dead_letter_records, with $1.. for args) replayed or discarded, as the
// console's actions would, and returns how many it settled.
func Settle(t testing.TB, db sqlx.Execer, o Outcome, where string, args ...any) int64 {
	t.Helper()
	if o.Status != "replayed" && o.Status != "discarded" {
		t.Fatalf("settle: status %q, want replayed or discarded", o.Status)
	}
	var at *time.Time
	if !o.At.IsZero() {
		at = &o.At
	}
	var job *int64
	if o.ReplayJobID != 0 {
		job = &o.ReplayJobID
	}
	n := len(args)
	q := fmt.Sprintf(settleSQL, where, n+1, n+2, n+3, n+4, n+5)
	r, err := db.Exec(q, append(args, o.Status, at, cmp.Or(o.By, "test"), job, cmp.Or(o.Reason, "not needed"))...)
	if err != nil {
		t.Fatalf("settle letters: %v", err)
	}
	settled, _ := r.RowsAffected()
	return settled
}

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
	var id int64
	err := db.Get(&id, insertLetterSQL, jobID, l.Queue, l.Task, l.Args, l.Kwargs, l.ErrorClass, l.Message, l.Traceback,
		l.Attempts, l.MaxAttempts, l.History, l.Reason, l.Fingerprint, l.WorkerVersion, l.EnqueuedAt, l.FailedAt,
		l.ReplayOf)
	if err != nil {
		t.Fatalf("insert dead letter: %v", err)
	}
	if l.Status == "replayed" || l.Status == "discarded" {
		Settle(t, db, Outcome{Status: l.Status, At: l.FailedAt.Add(time.Minute), ReplayJobID: cmp.Or(l.ReplayJobID, 999_999)},
			"id = $1", id)
	}
	if err := IndexSearch(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return id
}

// IndexSearch builds the search rows of the letters written since the last
// call, as the console's background indexer would a moment later
// (00102_search.sql), so that a test can search for a letter it just wrote.
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
WITH gen AS MATERIALIZED (
SELECT $3::bigint + g AS job_id, x.queue, x.task,
	jsonb_build_array($3::bigint + g, 'customer-' || (g % 50000)) AS args,
	jsonb_build_object('order_id', 'ord_' || ($3::bigint + g), 'region', (ARRAY['eu', 'us', 'ap'])[1 + g % 3]) AS kwargs,
	x.class, x.message, 'Traceback (most recent call last):' || E'\n' ||
		'  File "/srv/app/' || replace(x.task, '.', '/') || '.py", line ' || (10 + x.kind) || ', in run' || E'\n' ||
		'    raise ' || x.class || E'\n' || x.class || ': ' || x.message AS traceback,
	x.attempts,
	jsonb_build_array(jsonb_build_object('attempt', x.attempts, 'at', x.failed_at, 'host', 'worker-' || (g % 7),
		'version', 'v1.4.' || (x.kind % 3), 'class', x.class, 'message', x.message, 'outcome', 'dead', 'duration_ms', g % 900)) AS history,
	x.reason, x.fingerprint, 'v1.4.' || (x.kind % 3) AS version, x.failed_at - interval '10 minutes' AS enqueued_at, x.failed_at,
	x.st, $3::bigint + 2000000000 + g AS replay_job_id
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
) x
), letters AS (
	INSERT INTO dead_letter_records (job_id, queue, task, args, kwargs, error_class, error_message, traceback,
		attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at)
	SELECT job_id, queue, task, args, kwargs, class, message, traceback, attempts, 5, history, reason, fingerprint,
		version, enqueued_at, failed_at FROM gen
)
INSERT INTO seed_outcomes (job_id, st, replay_job_id) SELECT job_id, st, replay_job_id FROM gen WHERE st <> 'pending'`

// seedOutcomesSQL settles the seeded letters seedLettersSQL drew a status
// for, an hour after they failed, once their pending rows exist.
const seedOutcomesSQL = `
WITH taken AS (
	DELETE FROM pending_dead_letters p USING dead_letter_records r, seed_outcomes s
	WHERE s.job_id = r.job_id AND p.id = r.id
	RETURNING p.id, p.failed_at, p.task, p.queue, s.st, s.replay_job_id
)
INSERT INTO dead_letter_outcomes (failed_at, dead_letter_id, task, queue, replayed_at, replayed_by, replay_job_id,
	discarded_at, discarded_by, discard_reason)
SELECT failed_at, id, task, queue,
	CASE WHEN st = 'replayed' THEN failed_at + interval '1 hour' END, CASE WHEN st = 'replayed' THEN 'seed' END,
	CASE WHEN st = 'replayed' THEN replay_job_id END,
	CASE WHEN st = 'discarded' THEN failed_at + interval '1 hour' END, CASE WHEN st = 'discarded' THEN 'seed' END,
	CASE WHEN st = 'discarded' THEN 'known issue' END
FROM taken`

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
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE seed_outcomes (job_id bigint, st text, replay_job_id bigint) ON COMMIT DROP`); err != nil {
		return err
	}
	// The letters' job ids are taken from the jobs' sequence, as a real
	// letter's are, so that letters a test writes afterwards do not collide.
	var base int64
	if err := tx.GetContext(ctx, &base, `
SELECT setval(pg_get_serial_sequence('jobs', 'id'), greatest(
	coalesce(pg_sequence_last_value(pg_get_serial_sequence('jobs', 'id')::regclass), 0),
	(SELECT coalesce(max(job_id), 0) FROM dead_letters)) + $1) - $1`, n); err != nil {
		return fmt.Errorf("seed dead letters: reserve job ids: %w", err)
	}
	for done := 0; done < n; {
		batch := min(100_000, n-done)
		if _, err := tx.ExecContext(ctx, seedLettersSQL, batch, now.UTC(), base+int64(done)); err != nil {
			return fmt.Errorf("seed dead letters: %w", err)
		}
		done += batch
	}
	if _, err := tx.ExecContext(ctx, seedOutcomesSQL); err != nil {
		return fmt.Errorf("seed dead letters: outcomes: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if err := IndexSearch(ctx, db); err != nil {
		return err
	}
	// As autovacuum would leave a table at rest: statistics for the planner
	// and a visibility map that lets index-only scans skip the heap.
	_, err = db.ExecContext(ctx, `VACUUM ANALYZE dead_letter_records, pending_dead_letters, dead_letter_outcomes, dead_letter_search`)
	return err
}

// GroupID is a 16-hex error group id made from parts, for tests that need
// a group id of their own without learning one from letters.
func GroupID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
