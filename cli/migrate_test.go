package cli

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/migrations"
	"github.com/redrive/redrive/store/storetest"
)

// A database migrated by a build from before the schema baseline is
// refused by `redrive migrate` (and so by `serve --migrate` and `dev`,
// which migrate the same way), with what happened and what to do.
func TestMigrateRefusesADatabaseFromBeforeTheBaseline(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	db.MustExec(`DELETE FROM goose_db_version WHERE version_id >= $1`, migrations.Baseline)
	db.MustExec(`INSERT INTO goose_db_version (version_id, is_applied) SELECT v, true FROM generate_series(1, 43) v`)

	r := runCLI(t, map[string]string{"DATABASE_URL": db.DSN}, "", "migrate")
	if r.code != 1 {
		t.Fatalf("migrate: exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"nothing migrated", "migrated by an older build of Redrive",
		"drop this database, create it again and run `redrive migrate`", "`redrive dev --reset`"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("migrate says %q, which lacks %q", r.stderr, want)
		}
	}
}
