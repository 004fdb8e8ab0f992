package dlq

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"
)

// seedBatchSize is how many letters one INSERT ... SELECT writes. Each
// batch is its own statement and transaction: a long seed shows progress in
// the table as it goes, an interrupted one keeps what it wrote, and no
// transaction holds a million rows' worth of locks and WAL.
const seedBatchSize = 100_000

// seedMaxParallel caps how many batches run at once.
const seedMaxParallel = 4

// seedVar is a random value a template refers to as {name}. Its SQL
// expression is evaluated once per letter, so a letter's message, args and
// traceback agree (the order in the message is the order in the args).
// sample is a typical value, used to compute each kind's fingerprint in Go.
type seedVar struct {
	name, sql, sample string
}

// pick is SQL choosing one of values uniformly at random.
func pick(values ...string) string {
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = pq.QuoteLiteral(v)
	}
	return fmt.Sprintf("(ARRAY[%s])[1 + floor(random() * %d)::int]", strings.Join(quoted, ", "), len(values))
}

// between is SQL for a random integer in [lo, hi], as text.
func between(lo, hi int) string {
	return fmt.Sprintf("(%d + floor(random() * %d)::bigint)::text", lo, hi-lo+1)
}

var (
	seedNames   = pick("maria.garcia", "james.smith", "li.wei", "fatima.khan", "lukas.muller", "sofia.rossi", "noah.johnson", "amara.okafor", "yuki.tanaka", "olivia.brown", "mateo.silva", "chloe.martin")
	seedDomains = pick("gmail.com", "outlook.com", "yahoo.co.uk", "proton.me", "icloud.com", "acme-corp.com", "web.de")
)

// seedVars are the per-letter values. Those used in message templates must
// normalise away completely (see seed_catalog.go). The expressions may use
// the query's $2, the seed's now.
var seedVars = []seedVar{
	{"order", `'ORD-' || ` + between(10000, 999999), "ORD-88123"},
	{"amount", between(5, 999) + ` || '.' || lpad(floor(random() * 100)::int::text, 2, '0')`, "129.99"},
	{"amount2", between(1, 120) + ` || '.' || lpad(floor(random() * 100)::int::text, 2, '0')`, "20.00"},
	{"currency", pick("USD", "EUR", "GBP", "CAD", "AUD"), "USD"},
	{"card", `lpad(floor(random() * 10000)::int::text, 4, '0')`, "4242"},
	{"customer", `'cus_' || to_hex(floor(random() * 4503599627370496)::bigint)`, "cus_9f2c41d07ab3e6"},
	{"charge", `'ch_3' || ` + between(100000000, 999999999), "ch_3512345678"},
	{"request", `'req_' || to_hex(floor(random() * 4503599627370496)::bigint)`, "req_5d1e0c9a7b3f42"},
	{"email", seedNames + ` || floor(random() * 100)::int || '@' || ` + seedDomains, "maria.garcia7@gmail.com"},
	{"bademail", seedNames + ` || '@' || ` + pick("gmail", "hotmail", "outlook"), "maria.garcia@gmail"},
	{"user", between(1000, 999999), "48213"},
	{"ip", `'10.0.' || floor(random() * 8)::int || '.' || ` + between(2, 254), "10.0.3.17"},
	{"uuid", `gen_random_uuid()::text`, "7c9e6679-7425-40de-944b-e07fc1f90ae7"},
	{"addr", `'0x7f' || to_hex(floor(random() * 1099511627776)::bigint)`, "0x7f3a2c1d9e50"},
	{"sku", `'SKU-' || ` + between(1000, 9999), "SKU-1042"},
	{"qty", between(3, 12), "4"},
	{"left", between(0, 2), "1"},
	{"warehouse", pick("ams-1", "fra-2", "iad-1", "sfo-3"), "ams-1"},
	{"whhost", pick("hooks.acme-shop.com", "api.brightlane.io", "webhooks.northwind.dev", "hooks.zapier.com", "integrations.globex.net", "n8n.pixelforge.app", "erp.contoso-retail.com"), "hooks.zapier.com"},
	{"status", pick("500", "502", "503", "504"), "503"},
	{"ms", between(200, 30000), "10000"},
	{"event", pick("order.paid", "order.refunded", "customer.updated", "invoice.finalized", "subscription.renewed"), "order.paid"},
	{"locale", pick("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "nl_NL"), "en_US"},
	{"account", between(100, 20000), "4821"},
	{"period", `to_char($2::timestamptz - floor(random() * 12)::int * interval '1 month', 'YYYY-MM')`, "2025-01"},
	{"product", between(100000, 999999), "412345"},
	{"crmid", between(10000000, 99999999), "51234567"},
	{"pid", between(1000, 65000), "31337"},
	{"pid2", between(1000, 65000), "31338"},
	{"txid", between(5000000, 9000000), "7340123"},
	{"txid2", between(5000000, 9000000), "7340125"},
}

var placeholder = regexp.MustCompile(`\{([a-z][a-z0-9_]*)\}`)

// expand replaces each {name} in tmpl with fill(i, seedVars[i]) for the
// variable of that name. An unknown name is an error: a typo must not
// reach the table.
func expand(tmpl string, fill func(i int, v seedVar) string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[1 : len(m)-1]
		for i, v := range seedVars {
			if v.name == name {
				return fill(i, v)
			}
		}
		unknown = append(unknown, m)
		return m
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown placeholders %v in template %q", unknown, tmpl)
	}
	return out, nil
}

// sqlFormat turns a template into a format() string: a literal % becomes
// %%, and {name} becomes %N$s, N being the variable's position in the
// argument list seedSQL passes to every format() call.
func sqlFormat(tmpl string) (string, error) {
	return expand(strings.ReplaceAll(tmpl, "%", "%%"), func(i int, _ seedVar) string { return fmt.Sprintf("%%%d$s", i+1) })
}

// sampleText fills a template with each variable's sample value.
func sampleText(tmpl string) (string, error) {
	return expand(tmpl, func(_ int, v seedVar) string { return v.sample })
}

// seedKindArrays is the catalog as parallel arrays, one element per kind,
// ready to be unnested by seedSQL. Fingerprints are computed here, in Go,
// by the same Fingerprint the worker uses.
type seedKindArrays struct {
	task, queue, class, classJSON, message, messageJSON, traceback, args, kwargs, key, reason, fingerprint []string
	maxAttempts                                                                                            []int64
	burstAgo, burstSpan                                                                                    []float64 // seconds
	// uses has bit i set when the kind's templates use seedVars[i]; the
	// others are not computed for its letters.
	uses []int64
	// slots holds each kind's 1-based index weight times: a uniform pick
	// from it is a weighted pick of a kind.
	slots []int64
}

func buildSeedKinds() (seedKindArrays, error) {
	if len(seedVars) > 63 {
		return seedKindArrays{}, fmt.Errorf("%d seed variables: the uses mask holds 63", len(seedVars))
	}
	tasks := make(map[string]seedTask, len(seedTasks))
	for _, t := range seedTasks {
		tasks[t.name] = t
	}
	var a seedKindArrays
	for i, k := range seedKinds {
		t, ok := tasks[k.task]
		if !ok {
			return a, fmt.Errorf("seed kind %d: unknown task %q", i, k.task)
		}
		kwargs := cmp.Or(k.kwargs, t.kwargs)
		templates := []string{k.message, jsonInner(k.message), k.traceback(t), t.args, kwargs, t.idempotencyKey}
		var fmts []string
		var uses int64
		for _, tmpl := range templates {
			f, err := sqlFormat(tmpl)
			if err != nil {
				return a, fmt.Errorf("seed kind %d (%s %s): %w", i, k.task, k.class, err)
			}
			fmts = append(fmts, f)
			for _, m := range placeholder.FindAllStringSubmatch(tmpl, -1) {
				uses |= 1 << slices.IndexFunc(seedVars, func(v seedVar) bool { return v.name == m[1] })
			}
		}
		sample, err := sampleText(k.message)
		if err != nil {
			return a, err
		}
		a.task = append(a.task, t.name)
		a.queue = append(a.queue, t.queue)
		a.class = append(a.class, k.class)
		a.classJSON = append(a.classJSON, `"`+jsonInner(k.class)+`"`)
		a.message = append(a.message, fmts[0])
		a.messageJSON = append(a.messageJSON, fmts[1])
		a.traceback = append(a.traceback, fmts[2])
		a.args = append(a.args, fmts[3])
		a.kwargs = append(a.kwargs, fmts[4])
		a.key = append(a.key, fmts[5])
		a.reason = append(a.reason, string(k.reason))
		a.fingerprint = append(a.fingerprint, Fingerprint(t.name, k.class, sample))
		a.maxAttempts = append(a.maxAttempts, int64(t.maxAttempts))
		a.burstAgo = append(a.burstAgo, k.burstAgo.Seconds())
		a.burstSpan = append(a.burstSpan, k.burstSpan.Seconds())
		a.uses = append(a.uses, uses)
		for range k.weight {
			a.slots = append(a.slots, int64(i+1))
		}
	}
	return a, nil
}

// jsonInner is s as the inside of a JSON string literal, without the quotes.
// The history is assembled as JSON text in SQL (jsonb_build_object costs
// several microseconds per call on Postgres 15, too much for a million
// rows), so messages go in pre-escaped. Seed values never need escaping.
func jsonInner(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

// seedReleases are the worker versions that wrote the letters, newest first;
// each ran from since before now until the next one. The newest arrived
// with the reports.generate KeyError incident.
var seedReleases = []struct {
	version string
	since   time.Duration
}{
	{"v1.15.0", seedDeployAgo},
	{"v1.14.2", 9 * 24 * time.Hour},
	{"v1.14.1", 0}, // everything older
}

// versionAt is SQL for the version that was running at the time expr. The
// query's $21 holds when each release but the oldest started.
func versionAt(expr string) string {
	var b strings.Builder
	b.WriteString("CASE")
	for i, r := range seedReleases[:len(seedReleases)-1] {
		fmt.Fprintf(&b, " WHEN %s >= ($21::timestamptz[])[%d] THEN '%s'", expr, i+1, r.version)
	}
	fmt.Fprintf(&b, " ELSE '%s' END", seedReleases[len(seedReleases)-1].version)
	return b.String()
}

// releaseStarts is the $21 of versionAt.
func releaseStarts(now time.Time) []time.Time {
	var starts []time.Time
	for _, r := range seedReleases[:len(seedReleases)-1] {
		starts = append(starts, now.Add(-r.since))
	}
	return starts
}

// seedSQLTemplate writes $1 letters as of $2. Placeholders in {{braces}}
// are filled by seedSQL from the Go tables above; no value from a caller
// is ever spliced in.
//
// Four steps, each evaluated once per letter:
//   - picked draws the letter's kind (weighted) and its dice.
//   - drawn adds the kind's timing, attempts and status, and the random
//     values ({{vars}}: v_order, v_email, ...) that the kind's templates use.
//   - letters adds the message as it appears (JSON-escaped) in every
//     history entry.
//   - the INSERT fills the other templates with format() and assembles the
//     history from one entry per attempt.
//
// The steps are MATERIALIZED so that each random value is drawn exactly
// once (the order id in the message is the order id in the args) and each
// string is built once, not once per attempt that mentions it.
//
// Shape of a letter, and why:
//   - failed_at is spread over the 14 days before $2, weighted toward recent
//     (age = 14 days * u²); an incident kind fails only inside its window.
//   - attempts: permanent fails on the first attempt; exhausted and
//     lease_expired used every attempt (the rescuer dead-letters a job only
//     on its last). History has one entry per attempt, spaced by a backoff
//     that doubles from the letter's base delay, so the first attempt was
//     at failed_at - base * (2^(attempts-1) - 1).
//   - The traceback is kept on the letter, not repeated in every history
//     entry: ten copies of a 1.5 kB traceback would triple the table.
//   - The history is JSON text cast to jsonb, its keys written in jsonb's
//     own order (shorter first, then bytewise) so that the cast finds them
//     already sorted: parsing is most of what a letter costs.
//   - status: 70% pending; permanent failures are mostly discarded, the
//     others mostly replayed, between the failure and $2, usually soon after.
//   - job_id and replay_job_id come from the jobs id sequence, so no job the
//     worker creates later can collide with a seeded letter's job.
//   - Hosts and pids follow from (letter, attempt) rather than random(): a
//     worker process keeps its pid, and a retry lands on another worker.
//   - Letters go in oldest first (ORDER BY failed_at), so within a batch
//     ids rise with failed_at as they do when a worker dead-letters them:
//     a time window ("since the incident began") is a few runs of
//     neighbouring rows, one per batch, not one row in ten all over the
//     table. Sorted input is also cheaper to index: every index but the
//     two on ids has failed_at in its key, and its entries now go in along
//     a few hot paths instead of at random leaves (a 50,000-letter batch
//     into a million letters: 20 s of server CPU instead of 27 s here).
const seedSQLTemplate = `
WITH kinds AS (
	SELECT * FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
		$10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::int[], $16::float8[], $17::float8[],
		$18::bigint[])
		WITH ORDINALITY AS k(task, queue, error_class, class_json, message_fmt, message_json_fmt, traceback_fmt,
			args_fmt, kwargs_fmt, key_fmt, reason, fingerprint, max_attempts, burst_ago_s, burst_span_s, uses, kind)
),
picked AS MATERIALIZED (
	SELECT g, ($19::int[])[1 + floor(random() * cardinality($19::int[]))::int] AS kind,
		random() AS age_roll, random() AS status_roll, random() AS acted_roll,
		5000 + floor(random() * 10000)::bigint AS backoff_ms,
		floor(random() * 120000)::bigint AS queued_ms
	FROM generate_series(1, $1::int) g
),
drawn AS MATERIALIZED (
	SELECT p.g, p.kind, p.acted_roll, p.backoff_ms, p.queued_ms,
		CASE WHEN k.reason = 'permanent' THEN 1 ELSE k.max_attempts END AS attempts,
		$2::timestamptz - CASE WHEN k.burst_span_s > 0
			THEN make_interval(secs => k.burst_ago_s - p.age_roll * k.burst_span_s)
			ELSE make_interval(secs => 14 * 86400 * p.age_roll ^ 2) END AS failed_at,
		CASE WHEN p.status_roll < 0.70 THEN 'pending'
			WHEN p.status_roll < CASE WHEN k.reason = 'permanent' THEN 0.76 ELSE 0.92 END THEN 'replayed'
			ELSE 'discarded' END AS status{{vars}}
	FROM picked p JOIN kinds k USING (kind)
),
letters AS MATERIALIZED (
	SELECT d.*, format(k.message_json_fmt{{args}}) AS message_json
	FROM drawn d JOIN kinds k USING (kind)
)
INSERT INTO dead_letters (job_id, queue, task, args, kwargs, idempotency_key, error_class, error_message,
	traceback, attempts, max_attempts, history, reason, fingerprint, worker_version, enqueued_at, failed_at,
	replayed_at, replayed_by, replay_job_id, discarded_at, discarded_by, discard_reason)
SELECT nextval($20::regclass), k.queue, k.task,
	format(k.args_fmt{{args}})::jsonb,
	format(k.kwargs_fmt{{args}})::jsonb,
	NULLIF(format(k.key_fmt{{args}}), ''),
	k.error_class,
	format(k.message_fmt{{args}}),
	format(k.traceback_fmt{{args}}),
	d.attempts, k.max_attempts, h.history, k.reason, k.fingerprint, {{versionAtFailure}},
	d.failed_at - (d.backoff_ms * ((1 << (d.attempts - 1)) - 1) + d.queued_ms) * interval '1 millisecond',
	d.failed_at,
	CASE WHEN d.status = 'replayed' THEN d.failed_at + ($2::timestamptz - d.failed_at) * d.acted_roll ^ 3 END,
	CASE WHEN d.status = 'replayed' THEN {{operator}} END,
	CASE WHEN d.status = 'replayed' THEN nextval($20::regclass) END,
	CASE WHEN d.status = 'discarded' THEN d.failed_at + ($2::timestamptz - d.failed_at) * d.acted_roll ^ 3 END,
	CASE WHEN d.status = 'discarded' THEN {{operator}} END,
	CASE WHEN d.status = 'discarded' THEN {{discardReason}} END
FROM letters d
JOIN kinds k USING (kind)
CROSS JOIN LATERAL (
	SELECT ('[' || string_agg(format(
		'{"at":"%s","host":"%s","class":%s,"worker":"%s-%s","attempt":%s,"message":"%s%s","outcome":"%s","version":"%s"%s}',
		to_char(a.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), a.host, k.class_json, a.host, a.pid, a.n,
		d.message_json,
		CASE WHEN k.reason = 'lease_expired' THEN format(' (held by %s-%s, expired %s, rescued by %s)', a.host, a.pid,
			to_char((a.at - interval '31 seconds') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), a.rescuer) ELSE '' END,
		CASE WHEN a.n = d.attempts THEN 'dead' WHEN k.reason = 'lease_expired' THEN 'lease_expired' ELSE 'retry' END,
		{{versionAtAttempt}},
		CASE WHEN a.n < d.attempts THEN ',"retry_in_ms":' || (d.backoff_ms << (a.n - 1)) ELSE '' END
	), ',' ORDER BY a.n) || ']')::jsonb AS history
	FROM (
		SELECT n,
			d.failed_at - d.backoff_ms * ((1 << (d.attempts - 1)) - (1 << (n - 1))) * interval '1 millisecond' AS at,
			(ARRAY['worker-7d9f4c-x2kqp', 'worker-7d9f4c-m8zt1', 'worker-7d9f4c-q4hnv', 'worker-7d9f4c-b7wcs',
				'worker-7d9f4c-t1rjd', 'worker-7d9f4c-9gk2f'])[1 + (d.g + n * 5) % 6] AS host,
			(ARRAY[7, 8, 7, 12, 7, 9])[1 + (d.g + n * 5) % 6] AS pid,
			(ARRAY['worker-7d9f4c-x2kqp-7', 'worker-7d9f4c-q4hnv-7'])[1 + (d.g + n) % 2] AS rescuer
		FROM generate_series(1, d.attempts) n
	) a
) h
ORDER BY d.failed_at`

var seedOperators = pick("priya.sharma@acme-corp.com", "tom.becker@acme-corp.com", "ana.lima@acme-corp.com", "oncall-bot")

var seedDiscardReasons = pick(
	"duplicate of an order that was charged later",
	"customer deleted their account",
	"superseded by a newer sync",
	"test data from the staging import",
	"handled by hand: refunded and emailed the customer",
	"endpoint owner asked us to stop retrying",
)

// seedSQL is seedSQLTemplate with its placeholders filled.
func seedSQL() string {
	var vars, args strings.Builder
	for i, v := range seedVars {
		fmt.Fprintf(&vars, ",\n\t\tCASE WHEN k.uses & %d <> 0 THEN %s END AS v_%s", int64(1)<<i, v.sql, v.name)
		fmt.Fprintf(&args, ", d.v_%s", v.name)
	}
	return strings.NewReplacer(
		"{{vars}}", vars.String(),
		"{{args}}", args.String(),
		"{{operator}}", seedOperators,
		"{{discardReason}}", seedDiscardReasons,
		"{{versionAtFailure}}", versionAt("d.failed_at"),
		"{{versionAtAttempt}}", versionAt("a.at"),
	).Replace(seedSQLTemplate)
}

// SeedDeadLetters inserts n realistic synthetic dead letters as of now, for
// benchmarks and the console demo: ten tasks on four queues failing in
// about forty-five ways, with args, tracebacks, per-attempt history, a mix
// of statuses and the fingerprint the worker would have computed. It writes
// set-based, seedBatchSize rows per statement and transaction, a few batches at
// a time, and returns how many letters it inserted (all of them unless it
// fails part way; batches that committed stay).
func (s *Store) SeedDeadLetters(ctx context.Context, n int, now time.Time) (int, error) {
	if n < 0 {
		return 0, &ValidationError{Fields: map[string]string{"n": "must not be negative"}}
	}
	kinds, err := buildSeedKinds()
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	var seq string
	if err := s.db.GetContext(ctx, &seq, `SELECT pg_get_serial_sequence('jobs', 'id')`); err != nil {
		return 0, fmt.Errorf("seed: find job id sequence: %w", err)
	}
	query := seedSQL()
	args := func(size int) []any {
		return []any{size, now,
			pq.Array(kinds.task), pq.Array(kinds.queue), pq.Array(kinds.class), pq.Array(kinds.classJSON),
			pq.Array(kinds.message), pq.Array(kinds.messageJSON), pq.Array(kinds.traceback), pq.Array(kinds.args),
			pq.Array(kinds.kwargs), pq.Array(kinds.key), pq.Array(kinds.reason), pq.Array(kinds.fingerprint),
			pq.Array(kinds.maxAttempts), pq.Array(kinds.burstAgo), pq.Array(kinds.burstSpan), pq.Array(kinds.uses),
			pq.Array(kinds.slots), seq, pq.Array(releaseStarts(now))}
	}

	// The work is CPU-bound in the server, so batches run side by side, one
	// backend each, about one per core (for a seed, client and server
	// usually share the machine).
	workers := min(runtime.NumCPU(), seedMaxParallel)
	inserted, err := inBatches(ctx, n, workers, func(ctx context.Context, size int) (int, error) {
		return s.seedBatch(ctx, query, args(size))
	})
	if err != nil {
		return inserted, err
	}
	// The letters' search rows, after the letters (migration 00016): the
	// same statement as the console's indexer, in large batches, side by
	// side. A console running meanwhile indexes some of them itself; SKIP
	// LOCKED keeps the two out of each other's way.
	if err := s.seedIndexSearch(ctx, workers); err != nil {
		return inserted, err
	}
	// Leave the table as a console wants it: GIN pending lists merged (or
	// the next ordinary insert would pay for merging them, and every search
	// would scan them), and fresh statistics, so the first queries are
	// planned for the table as it now is, not as autovacuum last saw it.
	if _, err := s.db.ExecContext(ctx, cleanGINPendingSQL); err != nil {
		return inserted, fmt.Errorf("seed: merge GIN pending lists: %w", err)
	}
	if _, err := s.db.ExecContext(ctx, `ANALYZE dead_letters, dead_letter_search`); err != nil {
		return inserted, fmt.Errorf("seed: analyze: %w", err)
	}
	return inserted, nil
}

const seedSettingsSQL = `SET LOCAL work_mem = '256MB'`

// seedIndexBatch is how many letters one seed indexing statement takes:
// as many as one insert batch.
//
// The pending list of the trigram index is left at its default size
// (gin_pending_list_limit, 4 MB). The seed used to raise it to 64 MB, and
// measured on 100,000 seeded letters that left the index several times
// the size for the same time: 95 MB built by the insert trigger under the
// 64 MB list, 287 MB by this statement under it, 39 MB by this statement
// under the default. A pending list's pages, once merged, are free only
// for later inserts, and a large list merges into half-empty pages.
const seedIndexBatch = seedBatchSize

// seedIndexSearch builds the search rows of every queued letter on workers
// connections at once.
func (s *Store) seedIndexSearch(ctx context.Context, workers int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				n, err := s.seedIndexOnce(ctx)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
					return
				}
				if n < seedIndexBatch {
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// seedIndexOnce indexes one batch in its own transaction, with the seed's
// work_mem: the batch's letters and texts stay in memory.
func (s *Store) seedIndexOnce(ctx context.Context) (int64, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("seed: index search: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, seedSettingsSQL); err != nil {
		return 0, fmt.Errorf("seed: index search: %w", err)
	}
	var n int64
	if err := tx.GetContext(ctx, &n, `SELECT dead_letter_search_index($1)`, seedIndexBatch); err != nil {
		return 0, fmt.Errorf("seed: index search: %w", translate(err))
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("seed: index search: commit: %w", err)
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
WHERE i.indrelid IN ('dead_letters'::regclass, 'dead_letter_search'::regclass) AND am.amname = 'gin'`

// inBatches calls insert for n rows in batches of at most seedBatchSize, on
// workers goroutines, and returns how many rows the calls reported. The
// first error stops the batches not yet started and is returned.
func inBatches(ctx context.Context, n, workers int, insert func(ctx context.Context, size int) (int, error)) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan int)
	go func() {
		defer close(batches)
		for left := n; left > 0; left -= seedBatchSize {
			select {
			case batches <- min(seedBatchSize, left):
			case <-ctx.Done():
				return
			}
		}
	}()
	var (
		mu       sync.Mutex
		inserted int
		firstErr error
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for size := range batches {
				rows, err := insert(ctx, size)
				mu.Lock()
				inserted += rows
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return inserted, firstErr
}

// seedBatch runs one batch in its own transaction.
func (s *Store) seedBatch(ctx context.Context, query string, args []any) (int, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("seed: begin: %w", err)
	}
	defer tx.Rollback()
	// A batch's random values (the materialized steps) and the new rows an
	// AFTER ... REFERENCING NEW TABLE trigger receives are held in work_mem:
	// enough of it keeps them off temporary files. The letters themselves
	// have no GIN index; their search rows are built afterwards
	// (seedIndexSearch).
	if _, err := tx.ExecContext(ctx, seedSettingsSQL); err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("seed: insert batch: %w", translate(err))
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("seed: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("seed: commit: %w", err)
	}
	return int(rows), nil
}
