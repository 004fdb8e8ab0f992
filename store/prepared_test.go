package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the plain driver, for a handle not from postgres.Open

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
