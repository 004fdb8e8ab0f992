package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/store/postgres"
)

func runMigrate(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("migrate", "Apply pending database migrations. Safe to run from several processes at\nonce: an advisory lock lets one migrate while the others wait.", e.stderr)
	register(fs, databaseOptions, []string{"migrate-database-url"})
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	logger, err := newLogger(f, e.stderr)
	if err != nil {
		return err
	}
	url := f.str("database-url")
	if direct := f.str("migrate-database-url"); direct != "" {
		url = direct
	}
	db, err := openDB(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := migrate(ctx, db, "", logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "schema at version %d\n", v)
	return nil
}

// migrate applies pending migrations over migrateURL when set, else over db.
// Behind a transaction pooler, or on a database migrated by a build from
// before the schema baseline, it refuses and says what to do.
func migrate(ctx context.Context, db *sqlx.DB, migrateURL string, logger *slog.Logger) (int64, error) {
	if migrateURL != "" {
		direct, err := postgres.Open(ctx, migrateURL)
		if err != nil {
			return 0, fmt.Errorf("REDRIVE_MIGRATE_DATABASE_URL: %w", err)
		}
		defer direct.Close()
		db = direct
	}
	v, err := postgres.Migrate(ctx, db, logger)
	switch {
	case errors.Is(err, postgres.ErrTransactionPooler):
		return 0, fmt.Errorf("%w; set REDRIVE_MIGRATE_DATABASE_URL (--migrate-database-url) to one, for example past PgBouncer to Postgres itself", err)
	case errors.Is(err, postgres.ErrSchemaBeforeBaseline):
		return 0, fmt.Errorf("%w. Those builds were never released and their databases are not upgraded: "+
			"drop this database, create it again and run `redrive migrate` (the dev cluster: `redrive dev --reset`, then `redrive dev`)", err)
	}
	return v, err
}
