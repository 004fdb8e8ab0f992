package store_test

import (
	"os"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/redrive/redrive/migrations"
	"github.com/redrive/redrive/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// migrationsOf is a goose provider of Redrive's migrations on db, for the
// tests that migrate a database down and up again.
func migrationsOf(t *testing.T, db *storetest.DB) *goose.Provider {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db.DB.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
