package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// ErrTransactionPooler is returned by Migrate when its connection goes
// through a transaction pooler: migrations need a direct connection.
var ErrTransactionPooler = errors.New("the database connection goes through a transaction pooler " +
	"(PgBouncer in transaction mode, or the like), which hands one client's statements to different server sessions")

// BehindTransactionPooler reports whether db reaches Postgres through a
// pooler that shares server sessions between client connections, such as
// PgBouncer in transaction or statement mode. Everything Redrive runs in
// a transaction or a single statement works there; what holds session
// state across statements does not: LISTEN, and goose's session advisory
// lock.
//
// It asks the server which backend runs each statement. One client
// connection runs a statement; a second then opens a transaction, which a
// pooler gives a free server session, by default the one just released;
// then the first runs another. On a direct connection (or a session
// pooler) each client connection has its own backend throughout; behind a
// transaction pooler either the second got the first's backend, or the
// first moved to another.
//
// Other clients of the same pooler (a console starting beside the worker)
// can take the released session in between and hand it back, so one
// round may see nothing; a direct connection never shows either sign, so
// a few rounds lose no certainty and one sign is enough.
func BehindTransactionPooler(ctx context.Context, db *sqlx.DB) (bool, error) {
	for range poolerCheckRounds {
		pooled, err := sharesSessions(ctx, db)
		if err != nil || pooled {
			return pooled, err
		}
	}
	return false, nil
}

// poolerCheckRounds is how many times BehindTransactionPooler looks.
const poolerCheckRounds = 5

// sharesSessions is one round of BehindTransactionPooler's check.
func sharesSessions(ctx context.Context, db *sqlx.DB) (bool, error) {
	a, err := db.Connx(ctx)
	if err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	defer a.Close()
	b, err := db.Connx(ctx)
	if err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	defer b.Close()
	var before, during, after int
	if err := a.GetContext(ctx, &before, `SELECT pg_backend_pid()`); err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	// Read-only: without it lib/pq begins READ WRITE, which a hot standby
	// refuses, and Open checks a replica's handle too.
	tx, err := b.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	defer tx.Rollback()
	if err := tx.GetContext(ctx, &during, `SELECT pg_backend_pid()`); err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	if err := a.GetContext(ctx, &after, `SELECT pg_backend_pid()`); err != nil {
		return false, fmt.Errorf("pooler check: %w", err)
	}
	return during == before || after != before, nil
}
