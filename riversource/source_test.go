package riversource_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/riversource"
	"github.com/redrive/redrive/riversource/riversourcetest"
	"github.com/redrive/redrive/store/storetest"
)

// A River app of the tests' own: a charge that its provider refuses, and a
// stock check that panics, each with one attempt, so River discards them.

type chargeArgs struct {
	Order string `json:"order"`
}

func (chargeArgs) Kind() string { return "charge_card" }

type chargeWorker struct {
	river.WorkerDefaults[chargeArgs]
}

func (chargeWorker) Work(_ context.Context, job *river.Job[chargeArgs]) error {
	return fmt.Errorf("payments provider answered 503 Service Unavailable for order %s", job.Args.Order)
}

type stockArgs struct {
	SKU string `json:"sku"`
}

func (stockArgs) Kind() string { return "check_stock" }

type stockWorker struct {
	river.WorkerDefaults[stockArgs]
}

func (stockWorker) Work(_ context.Context, job *river.Job[stockArgs]) error {
	warehouse := strings.Split(job.Args.SKU, "-")[2] // "sku-1" has no warehouse: the kind of bug that panics
	return fmt.Errorf("no stock in %s", warehouse)
}

// riverApp is River migrated into the test's database, and a client
// working both kinds, and those more adds, until the test ends.
func riverApp(t testing.TB, dsn string, more ...func(*river.Workers)) (*pgxpool.Pool, *river.Client[pgx.Tx]) {
	t.Helper()
	return riversourcetest.App(t, dsn, append([]func(*river.Workers){func(w *river.Workers) {
		river.AddWorker(w, chargeWorker{})
		river.AddWorker(w, stockWorker{})
	}}, more...)...)
}

// ordersApp is a database of the test's own with the River source
// orders-app configured, and every room of the store on it.
func ordersApp(t testing.TB) (*storetest.DB, *storetest.Stores) {
	t.Helper()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	if err := stores.Sources.Configure(context.Background(), []dlq.Source{{Name: "orders-app", Kind: dlq.SourceKindRiver}}); err != nil {
		t.Fatal(err)
	}
	return db, stores
}

// runSource runs a River source made of cfg until the test ends, or until
// stop, which waits for it and may be called again.
func runSource(t *testing.T, cfg riversource.Config) (*riversource.Source, func()) {
	t.Helper()
	source, err := riversource.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- source.Run(ctx) }()
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("river source: %v", err)
		}
	})
	t.Cleanup(stop)
	return source, stop
}

func TestRiverDiscardsBecomeLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, stores := ordersApp(t)
	pool, app := riverApp(t, db.DSN)
	importer, stop := runSource(t, riversource.Config{Source: "orders-app", Pool: pool, Store: stores.Sources,
		Every: 50 * time.Millisecond, Settle: 300 * time.Millisecond, RecentEvery: 500 * time.Millisecond})

	// 30 charges refused by the provider and 5 stock checks that panic.
	var params []river.InsertManyParams
	for i := range 30 {
		params = append(params, river.InsertManyParams{Args: chargeArgs{Order: fmt.Sprintf("ord_%08X", 0x3D06+i*7919)},
			InsertOpts: &river.InsertOpts{MaxAttempts: 1, Queue: "payments", Tags: []string{"checkout"}}})
	}
	for i := range 5 {
		params = append(params, river.InsertManyParams{Args: stockArgs{SKU: fmt.Sprintf("sku-%d", i)}, InsertOpts: &river.InsertOpts{MaxAttempts: 1}})
	}
	if _, err := app.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}

	// Each appears within 2 s of River discarding it: the test looks every
	// 20 ms and notes when it first sees each.
	deadline := time.Now().Add(30 * time.Second)
	seen := map[string]time.Duration{}
	for len(seen) < 35 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 35 discarded jobs became letters in 30 s", len(seen))
		}
		var rows []struct {
			External string    `db:"external_id"`
			FailedAt time.Time `db:"failed_at"`
		}
		if err := db.Select(&rows, `SELECT s.external_id, r.failed_at FROM letter_sources s
			JOIN dead_letter_records r ON r.id = s.dead_letter_id WHERE s.source = 'orders-app'`); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if _, ok := seen[r.External]; !ok {
				seen[r.External] = time.Since(r.FailedAt)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var worst time.Duration
	for id, lag := range seen {
		worst = max(worst, lag)
		if lag > 2*time.Second {
			t.Errorf("letter %s appeared %s after River discarded its job; want within 2 s", id, lag)
		}
	}
	t.Logf("the slowest of 35 letters appeared %s after River discarded its job", worst)

	// What a letter keeps of its job.
	var letter struct {
		Task, Queue, Class, Message, Kwargs, External, Details string
		Attempts                                               int
		History                                                []byte
	}
	if err := db.Get(&letter, `SELECT r.task, r.queue, r.error_class AS class, r.error_message AS message, r.kwargs::text AS kwargs,
			r.attempts, r.history::text::bytea AS history, s.external_id AS external, s.details::text AS details
		FROM dead_letter_records r JOIN letter_sources s ON s.dead_letter_id = r.id
		WHERE r.task = 'charge_card' ORDER BY r.id LIMIT 1`); err != nil {
		t.Fatal(err)
	}
	if letter.Queue != "payments" || letter.Class != "error" || letter.Attempts != 1 ||
		letter.Message == "" || letter.Kwargs[:10] != `{"order": ` {
		t.Errorf("letter of a charge: %+v", letter)
	}
	var details struct {
		Kind  string   `json:"kind"`
		JobID int64    `json:"job_id"`
		Tags  []string `json:"tags"`
	}
	if err := json.Unmarshal([]byte(letter.Details), &details); err != nil || details.Kind != "charge_card" ||
		len(details.Tags) != 1 || letter.External != dlq.RiverExternalID(details.JobID, 1) {
		t.Errorf("details %s (err %v), external id %s", letter.Details, err, letter.External)
	}
	var history dlq.Attempts
	if err := json.Unmarshal(letter.History, &history); err != nil || len(history) != 1 || history[0].Outcome != dlq.OutcomeDead {
		t.Errorf("history %s (err %v)", letter.History, err)
	}
	var panics int
	if err := db.Get(&panics, `SELECT count(*) FROM dead_letters WHERE task = 'check_stock' AND error_class = 'panic'
		AND traceback LIKE '%stockWorker%'`); err != nil || panics != 5 {
		t.Errorf("%d panicking jobs kept their stack trace (err %v), want 5", panics, err)
	}

	// One outage, one group: the order numbers do not split it.
	var groups int
	if err := db.Get(&groups, `SELECT count(DISTINCT fingerprint) FROM dead_letter_records WHERE task = 'charge_card'`); err != nil || groups != 1 {
		t.Errorf("30 refused charges fell into %d groups (err %v), want 1", groups, err)
	}

	// The same failures imported again, from the start and by the sweep,
	// are the same letters.
	stop()
	if _, err := db.Exec(`UPDATE sources SET import_cursor = NULL WHERE name = 'orders-app'`); err != nil {
		t.Fatal(err)
	}
	if err := importer.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := importer.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM dead_letter_records`); err != nil || n != 35 {
		t.Errorf("%d letters after importing everything again (err %v), want 35", n, err)
	}
	var imported int
	if err := db.Get(&imported, `SELECT imported FROM sources WHERE name = 'orders-app'`); err != nil || imported != 35 {
		t.Errorf("the source counts %d imported (err %v), want 35", imported, err)
	}
}

// Two consoles importing the same source: the one whose cursor moved
// first wins, the other writes nothing and reads the cursor again.
func TestImportRefusesAMovedCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, stores := ordersApp(t)
	letter := dlq.IngestLetter{ExternalID: "1/1", Task: "charge_card", ErrorClass: "error", Message: "boom", FailedAt: time.Now()}
	letter, err := letter.Normalise(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stores.Sources.Import(ctx, "orders-app", []dlq.IngestLetter{letter}, "", "c1"); err != nil {
		t.Fatal(err)
	}
	letter.ExternalID = "2/1"
	if _, err := stores.Sources.Import(ctx, "orders-app", []dlq.IngestLetter{letter}, "", "c2"); !errors.Is(err, dlq.ErrImportCursorMoved) {
		t.Fatalf("import from a stale cursor: %v, want ErrImportCursorMoved", err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM letter_sources`); err != nil || n != 1 {
		t.Errorf("%d letters after a refused import (err %v), want 1", n, err)
	}
	if cursor, err := stores.Sources.ImportCursor(ctx, "orders-app"); err != nil || cursor != "c1" {
		t.Errorf("cursor %q (err %v), want c1", cursor, err)
	}
}

// Discards a week apart, a burst within a millisecond and a thousand and
// a half finalised at the very same instant (ties broken by id across a
// page) are each imported once, and the cursor ends past them.
func TestImportAcrossGapsBurstsAndTies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, stores := ordersApp(t)
	pool, _ := riverApp(t, db.DSN)
	if _, err := db.Exec(`
		INSERT INTO river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
			priority, args, errors, kind, queue, metadata, tags)
		SELECT 'discarded', 1, 1, f, f, f, f, 1, '{}', ARRAY[jsonb_build_object('at', f, 'attempt', 1, 'error', 'boom', 'trace', '')],
			'charge_card', 'payments', '{}', '{}'
		FROM (
			SELECT now() - interval '14 days' + g * interval '7 days' AS f FROM generate_series(0, 1) g
			UNION ALL SELECT now() - interval '1 hour' + (g / 3) * interval '1 microsecond' FROM generate_series(1, 2500) g
			UNION ALL SELECT date_trunc('second', now() - interval '10 minutes') FROM generate_series(1, 1500)
		) t`); err != nil {
		t.Fatal(err)
	}
	source, err := riversource.New(riversource.Config{Source: "orders-app", Pool: pool, Store: stores.Sources})
	if err != nil {
		t.Fatal(err)
	}
	if err := source.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	var n, distinct int
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT external_id) FROM letter_sources`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n != 4002 || distinct != 4002 {
		t.Errorf("%d letters (%d distinct) from 4,002 discards", n, distinct)
	}
	// Caught up: a second pass finds nothing new.
	if err := source.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&n, `SELECT count(*) FROM letter_sources`); err != nil || n != 4002 {
		t.Errorf("%d letters after catching up again (err %v)", n, err)
	}
}

// A discard whose transaction commits after the cursor passed its time (a
// loaded River completer writes its outcomes late) is swept in within the
// frequent sweep's period, once.
func TestLateDiscardIsSweptIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, stores := ordersApp(t)
	pool, app := riverApp(t, db.DSN)
	runSource(t, riversource.Config{Source: "orders-app", Pool: pool, Store: stores.Sources,
		Every: 50 * time.Millisecond, Settle: 100 * time.Millisecond, RecentEvery: 300 * time.Millisecond})

	if _, err := app.Insert(ctx, chargeArgs{Order: "ord_1"}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM letter_sources`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for count() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first discard was not imported")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The cursor is past now - Settle; a discard stamped 5 s ago becomes
	// visible only now.
	if _, err := db.Exec(`
		INSERT INTO river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
			priority, args, errors, kind, queue, metadata, tags)
		VALUES ('discarded', 1, 1, now() - interval '6 seconds', now() - interval '7 seconds', now() - interval '5 seconds',
			now() - interval '7 seconds', 1, '{"order": "ord_late"}',
			ARRAY[jsonb_build_object('at', now() - interval '5 seconds', 'attempt', 1, 'error', 'late', 'trace', '')],
			'charge_card', 'default', '{}', '{}')`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for count() < 2 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("a discard committed after the cursor passed its time was not swept in within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("swept in %s after it became visible", time.Since(start).Round(time.Millisecond))
	time.Sleep(700 * time.Millisecond) // on purpose: two more sweeps, which must make no letter twice
	if n := count(); n != 2 {
		t.Errorf("%d letters after more sweeps, want 2", n)
	}
}
