package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
)

// InTx runs fn in a transaction, committing when it returns nil. Every
// room of the store changes data through it, so a change and its audit
// entry commit together or not at all.
func InTx(ctx context.Context, db *sqlx.DB, fn func(*sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// ReadOnly runs fn in a read-only repeatable-read transaction: one snapshot
// for every query fn runs. The options go in BEGIN itself: without
// ReadOnly, lib/pq begins with READ WRITE, which a hot standby refuses
// ("cannot set transaction read-write mode during recovery").
func ReadOnly(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Translate converts driver errors into the store's coded errors at the
// edge of each room: no row is dlq.ErrNotFound, a unique violation a
// conflict, a refused value invalid input, a lost database unavailable.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return dlq.ErrNotFound
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		switch pqErr.Code {
		case "23505": // unique_violation
			return &dlq.Error{Code: dlq.EConflict, Message: pqErr.Message}
		case "23514", "22P02", "22023": // check_violation, invalid_text_representation, invalid_parameter_value
			return fmt.Errorf("%w: %s", dlq.ErrInvalid, pqErr.Message)
		}
	}
	return dlq.Unavailable(err)
}
