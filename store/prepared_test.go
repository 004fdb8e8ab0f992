package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the plain driver, for a handle not from postgres.Open

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// oneConnection opens dsn as the console does, limited to one connection,
// so that what a test asks of pg_prepared_statements is what its queries
// left in their session.
func oneConnection(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	return db
}

// preparedStatement is a row of pg_prepared_statements.
type preparedStatement struct {
	Statement    string `db:"statement"`
	GenericPlans int64  `db:"generic_plans"`
	CustomPlans  int64  `db:"custom_plans"`
}

func preparedStatements(t *testing.T, db *sqlx.DB) []preparedStatement {
	t.Helper()
	var out []preparedStatement
	if err := db.Select(&out, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements ORDER BY prepare_time`); err != nil {
		t.Fatal(err)
	}
	return out
}

// A letter's page read on a direct connection is prepared once, and from
// the sixth read on runs a generic plan: it is no longer planned per call.
func TestHotReadsArePreparedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
	conn := oneConnection(t, db.DSN)
	letters := storetest.NewStores(conn).Letters
	for range 8 {
		d, err := letters.GetDeadLetter(ctx, id)
		if err != nil || d.ID != id {
			t.Fatalf("letter %d: %+v, %v", id, d.ID, err)
		}
	}
	stmts := preparedStatements(t, conn)
	if len(stmts) != 1 || !strings.Contains(stmts[0].Statement, "FROM dead_letters d") {
		t.Fatalf("prepared statements after 8 reads of a letter: %+v, want the letter's one", stmts)
	}
	if s := stmts[0]; s.GenericPlans+s.CustomPlans != 8 || s.GenericPlans < 3 {
		t.Errorf("the letter's statement ran %d times with a generic plan and %d with a custom one; want most of 8 generic",
			s.GenericPlans, s.CustomPlans)
	}
	// An unmarked query is not kept.
	if _, err := letters.CountDeadLetters(ctx, dlq.Filter{Q: "boom"}); err != nil {
		t.Fatal(err)
	}
	if n := len(preparedStatements(t, conn)); n != 1 {
		t.Errorf("%d statements prepared after an unmarked query, want still 1", n)
	}
	// The list's first page takes no argument (its limit is written in):
	// one generic plan from its first run on. A filtered page is not kept.
	for range 3 {
		page, err := letters.ListDeadLetters(ctx, dlq.Filter{Limit: 50})
		if err != nil || len(page.Letters) != 1 {
			t.Fatalf("first page: %d letters, %v", len(page.Letters), err)
		}
	}
	if _, err := letters.ListDeadLetters(ctx, dlq.Filter{Limit: 50, Task: "billing.charge"}); err != nil {
		t.Fatal(err)
	}
	stmts = preparedStatements(t, conn)
	if len(stmts) != 2 || !strings.Contains(stmts[1].Statement, "LIMIT 51") || stmts[1].GenericPlans != 3 || stmts[1].CustomPlans != 0 {
		t.Errorf("prepared statements after the list's first page 3 times and a filtered page: %+v, want the letter's and the first page's, 3 generic plans", stmts)
	}
}

// DISCARD ALL (a session pooler's reset, or an operator's) deallocates the
// session's statements: the next read prepares its statement again
// instead of failing with "prepared statement does not exist".
func TestHotReadsSurviveDiscardAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "kept"})
	conn := oneConnection(t, db.DSN)
	letters := storetest.NewStores(conn).Letters
	if _, err := letters.GetDeadLetter(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(`DISCARD ALL`); err != nil {
		t.Fatal(err)
	}
	if n := len(preparedStatements(t, conn)); n != 0 {
		t.Fatalf("%d statements left after DISCARD ALL", n)
	}
	d, err := letters.GetDeadLetter(ctx, id)
	if err != nil || d.ErrorMessage != "kept" {
		t.Fatalf("letter after DISCARD ALL: %q, %v", d.ErrorMessage, err)
	}
	if n := len(preparedStatements(t, conn)); n != 1 {
		t.Errorf("%d statements prepared after reading again, want 1", n)
	}
}

// A migration that changes what a prepared statement returns makes
// Postgres refuse its cached plan ("cached plan must not change result
// type"). Outside a transaction the statement is prepared again and the
// read answers; inside one the transaction has failed, so the error is
// returned, and the next read outside prepares it again.
func TestHotReadsSurviveASchemaChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	if _, err := db.Exec(`CREATE TABLE probe (id int PRIMARY KEY, v int); INSERT INTO probe VALUES (1, 7)`); err != nil {
		t.Fatal(err)
	}
	conn := oneConnection(t, db.DSN)
	const q = `SELECT v FROM probe WHERE id = $1`
	read := func(ex sqlx.QueryerContext) (string, error) {
		var v string
		err := sqlx.GetContext(ctx, ex, &v, q, postgres.Prepared, 1)
		return v, err
	}
	if v, err := read(conn); err != nil || v != "7" {
		t.Fatalf("first read: %q, %v", v, err)
	}
	if _, err := db.Exec(`ALTER TABLE probe ALTER v TYPE text`); err != nil {
		t.Fatal(err)
	}
	if v, err := read(conn); err != nil || v != "7" {
		t.Fatalf("read after the column became text: %q, %v", v, err)
	}

	if _, err := db.Exec(`ALTER TABLE probe ALTER v TYPE bigint USING v::bigint`); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = read(tx)
	tx.Rollback()
	if err == nil || !strings.Contains(err.Error(), "cached plan must not change result type") {
		t.Fatalf("read in a transaction after the column became bigint: %v, want the changed result type", err)
	}
	if v, err := read(conn); err != nil || v != "7" {
		t.Fatalf("read after that transaction: %q, %v", v, err)
	}
}

// Prepared is not a parameter: a handle that does not take it out (not
// from postgres.Open) refuses the query rather than send it as $1.
func TestPreparedNeedsAHandleFromOpen(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	plain, err := sqlx.Open("postgres", db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	var n int
	err = plain.Get(&n, `SELECT $1::int`, postgres.Prepared, 1)
	if err == nil || !strings.Contains(err.Error(), "needs a database handle from postgres.Open") {
		t.Fatalf("Prepared through a plain lib/pq handle: %d, %v", n, err)
	}
}

// The console's hot reads, through PgBouncer in transaction mode, where
// they run unprepared (a statement prepared in one server session would be
// looked for in another: PgBouncer 1.18 keeps no prepared statements), answer
// as on a direct connection, from many clients over few server sessions.
func TestHotReadsThroughATransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	ps := throughPooler(t, db)
	now := time.Now()
	if _, err := store.Access.CreateUser(ctx, dlq.NewUser{Name: "ci", Role: dlq.RoleAdmin, PasswordHash: []byte("x"), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Access.CreateToken(ctx, dlq.NewToken{UserName: "ci", Label: "bench", Hash: dlq.HashToken("secret"), Actor: dlq.Actor{Name: "t"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 4 {
		ids = append(ids, storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Args: fmt.Sprintf(`[%d]`, i)}))
	}
	if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[0], Actor: dlq.Actor{Name: "ci"}, Reason: "r", Now: now, Key: "k"}); err != nil {
		t.Fatal(err)
	}
	// reads are the hot reads marked Prepared, each returning what it read.
	reads := func(s *storetest.Stores, id int64) (map[string]any, error) {
		out := map[string]any{}
		var err error
		check := func(name string, v any, e error) {
			out[name] = v
			if err == nil && e != nil {
				err = e
			}
		}
		d, e := s.Letters.GetDeadLetter(ctx, id)
		check("letter", d, e)
		_, tok, e := s.Access.UserByToken(ctx, dlq.HashToken("secret"), now)
		check("token", tok.Label, e)
		a, e := s.Audit.ListAudit(ctx, dlq.AuditFilter{DeadLetterID: id, Limit: 10})
		check("audit", len(a.Entries), e)
		runs, e := s.Operations.TestRuns(ctx, id, 10)
		check("test runs", len(runs), e)
		in, e := s.Operations.OperationsInFlight(ctx, 3)
		check("in flight", in.Open, e)
		pauses, _, e := s.Queue.OpenPauses(ctx)
		check("pauses", len(pauses), e)
		throttles, _, e := s.Queue.OpenThrottles(ctx)
		check("throttles", len(throttles), e)
		workers, e := s.Queue.Workers(ctx)
		check("workers", len(workers), e)
		n, e := s.Letters.CountDeadLetters(ctx, dlq.Filter{Task: "billing.charge"})
		check("count", n, e)
		return out, err
	}
	want := map[int64]map[string]any{}
	for _, id := range ids {
		var err error
		if want[id], err = reads(store, id); err != nil {
			t.Fatalf("direct reads of letter %d: %v", id, err)
		}
	}
	errs := make(chan error, 8*10)
	for g := range 8 {
		go func() {
			for i := range 10 {
				id := ids[(g+i)%len(ids)]
				got, err := reads(ps, id)
				if err == nil && !reflect.DeepEqual(got, want[id]) {
					err = fmt.Errorf("letter %d through the pooler: %+v, directly: %+v", id, got, want[id])
				}
				errs <- err
			}
		}()
	}
	var failed []string
	for range 8 * 10 {
		if err := <-errs; err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d of 80 rounds of hot reads failed through the pooler, e.g.:\n%s", len(failed), strings.Join(failed[:min(3, len(failed))], "\n"))
	}
}

// A query marked PreparedGeneric runs with a generic plan from its first
// run, without JIT; the queries after it, unmarked, marked Prepared or in
// a transaction, run with the session's own settings again.
func TestPreparedGenericSwitchesOnlyItsQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	conn := oneConnection(t, db.DSN)
	const settings = `SELECT current_setting('plan_cache_mode') || ' ' || current_setting('jit') || ' ' || $1::text`
	var own string
	if err := conn.GetContext(ctx, &own, settings, "x"); err != nil {
		t.Fatal(err)
	}
	read := func(mark any) string {
		t.Helper()
		var got string
		if err := conn.GetContext(ctx, &got, settings, mark, "x"); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for range 3 {
		if got := read(postgres.PreparedGeneric); got != "force_generic_plan off x" {
			t.Fatalf("a PreparedGeneric query ran with %q, want force_generic_plan, jit off", got)
		}
	}
	if got := read(postgres.Prepared); got != own {
		t.Errorf("a Prepared query after it ran with %q, want the session's own %q", got, own)
	}
	read(postgres.PreparedGeneric)
	var unmarked string
	if err := conn.GetContext(ctx, &unmarked, settings, "x"); err != nil || unmarked != own {
		t.Errorf("an unmarked query after it ran with %q (%v), want %q", unmarked, err, own)
	}
	read(postgres.PreparedGeneric)
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inTx string
	if err := tx.GetContext(ctx, &inTx, settings, postgres.PreparedGeneric, "x"); err != nil || inTx != own {
		t.Errorf("a PreparedGeneric query in a transaction ran with %q (%v), want the session's own %q: a SET there would be undone by a rollback", inTx, err, own)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	stmts := preparedStatements(t, conn)
	var generic int64
	for _, s := range stmts {
		generic += s.GenericPlans
	}
	if generic < 5 {
		t.Errorf("prepared statements %+v: want the PreparedGeneric runs' generic plans (5)", stmts)
	}
}
