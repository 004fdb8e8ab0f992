// Package postgres is what every room of the store shares: opening the
// database so that each query is one round trip (and works behind a
// transaction pooler) and the hot reads are planned once per connection
// (Prepared), migrating it, the read replica and its watch, the
// pooler check, COPY rows, the transaction helpers and the one translation
// of driver errors into the store's coded errors (tx.go).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/redrive/redrive/migrations"
)

// Open connects to Postgres and checks the connection.
//
// Every query goes out in one round trip, whatever the DSN says, so that
// Redrive works behind a transaction pooler such as PgBouncer (see
// oneTripConnector). A parameter bound for a bytea column must be passed as
// a bytea.
//
// On a direct connection (or through a session pooler) the queries marked
// Prepared are prepared once per connection. Behind a transaction pooler
// they are not: a statement prepared in one server session would be
// looked for in whichever session runs the next transaction. Open asks
// which it is (BehindTransactionPooler) before it returns.
func Open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	connector, err := newOneTripConnector(dsn)
	if err != nil {
		return nil, err
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "postgres")
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(10)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	pooled, err := BehindTransactionPooler(pingCtx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	connector.prepare.Store(!pooled)
	return db, nil
}

// newMigrator builds a goose provider over the embedded migrations. The
// session locker takes a Postgres advisory lock, so two processes starting
// together cannot both migrate.
func newMigrator(db *sqlx.DB, logger *slog.Logger) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, fmt.Errorf("migration lock: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if logger != nil {
		opts = append(opts, goose.WithSlog(logger))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db.DB, migrations.FS, opts...)
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration and returns the schema version.
//
// It needs a direct connection (or a session pooler): goose holds a session
// advisory lock from the first migration to the last, and behind a
// transaction pooler the lock, each migration and the unlock would run in
// different server sessions, leaving the lock held for ever. There it
// migrates nothing and returns ErrTransactionPooler.
func Migrate(ctx context.Context, db *sqlx.DB, logger *slog.Logger) (int64, error) {
	pooled, err := BehindTransactionPooler(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	if pooled {
		return 0, fmt.Errorf("migrate: nothing migrated: %w; migrations need a direct connection to Postgres", ErrTransactionPooler)
	}
	if err := checkBaseline(ctx, db); err != nil {
		return 0, fmt.Errorf("migrate: nothing migrated: %w", err)
	}
	p, err := newMigrator(db, logger)
	if err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Ready reports nil when the database answers and no migration is pending.
func Ready(ctx context.Context, db *sqlx.DB) error {
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if err := checkBaseline(ctx, db); err != nil {
		return fmt.Errorf("%w: drop it and run `redrive migrate` on a new one", err)
	}
	p, err := newMigrator(db, nil)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("check migrations: %w", err)
	}
	if pending {
		return fmt.Errorf("migrations pending: run `redrive migrate`")
	}
	return nil
}

// ErrSchemaBeforeBaseline is returned by Migrate and Ready when the
// database was migrated by a build of Redrive from before the schema
// baseline (see package migrations). Those builds were never released, and
// their databases are not upgraded: the history that would lead from them
// to the baseline is gone, and the baseline cannot tell how far along it
// a database got.
var ErrSchemaBeforeBaseline = errors.New("the database was migrated by an older build of Redrive, " +
	"from before its schema was squashed into one baseline")

// checkBaseline returns ErrSchemaBeforeBaseline when goose_db_version holds
// a version of the history before the baseline. It reads before goose
// takes its lock: goose would otherwise take the old versions for its own
// or try to create every table again.
func checkBaseline(ctx context.Context, db *sqlx.DB) error {
	var old bool
	err := db.GetContext(ctx, &old, `SELECT to_regclass('goose_db_version') IS NOT NULL`)
	if err == nil && old {
		err = db.GetContext(ctx, &old, `SELECT EXISTS (SELECT 1 FROM goose_db_version WHERE version_id > 0 AND version_id < $1)`,
			migrations.Baseline)
	}
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if old {
		return ErrSchemaBeforeBaseline
	}
	return nil
}
