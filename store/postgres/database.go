package postgres

import (
	"context"
	"fmt"

	"github.com/lib/pq"
)

// EnsureDatabase creates the database name on the server adminDSN points
// at, unless it exists. `redrive dev` makes its database on the private
// cluster with it.
func EnsureDatabase(ctx context.Context, adminDSN, name string) error {
	admin, err := Open(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer admin.Close()
	var exists bool
	if err := admin.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("check database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
