package demo

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// schemaSQL creates the demo's tables if they are missing.
//
//go:embed schema.sql
var schemaSQL string

// schemaLock is the advisory lock EnsureSchema holds while it creates the
// tables: two processes starting together (dev's worker and another
// `redrive worker --demo-tasks`) would otherwise race in CREATE TABLE IF
// NOT EXISTS, where the loser fails on a duplicate type.
const schemaLock = 0x7265647269766564 // "redrived"

// EnsureSchema creates the demo's tables in db (products, simulated
// dependencies) unless they exist. The baseline schema has none of them:
// they are the demo's, like an application's own tables, and only the
// commands that run the demo call this. It is one transaction, so it works
// through a transaction pooler too.
func EnsureSchema(ctx context.Context, db *sqlx.DB) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("demo schema: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
		return fmt.Errorf("demo schema: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("demo schema: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("demo schema: %w", err)
	}
	return nil
}
