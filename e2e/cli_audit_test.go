package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// A chain cannot prove its own end: with the triggers bypassed, deleting
// its newest entries leaves a shorter chain that verifies. `audit verify`
// prints the head it verified, and --expect-head checks the trail against
// a copy of it kept elsewhere.
func TestCLIAuditExpectHead(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	for range 116 {
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: dlq.Actor{Name: "olga"}, Reason: "dup", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	out, code := cli(t, db, "audit", "verify")
	m := regexp.MustCompile(`(?m)^head (\d+:[0-9a-f]{64})$`).FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "intact: 116 entries") || m == nil {
		t.Fatalf("audit verify: %d\n%s", code, out)
	}
	head := m[1]
	if !strings.HasPrefix(head, "116:") {
		t.Fatalf("head %s, want entry 116", head)
	}
	if out, code := cli(t, db, "audit", "verify", "--expect-head", head); code != 0 || !strings.Contains(out, "holds the expected head "+head) {
		t.Fatalf("--expect-head on the intact trail: %d\n%s", code, out)
	}

	// Cut off the last three entries as a superuser would.
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM audit_events WHERE id > 113`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// The shorter chain checks out on its own...
	if out, code := cli(t, db, "audit", "verify"); code != 0 || !strings.Contains(out, "intact: 113 entries") || !strings.Contains(out, "head 113:") {
		t.Fatalf("the truncated trail on its own: %d\n%s", code, out)
	}
	// ...but not against the head it had.
	out, code = cli(t, db, "audit", "verify", "--expect-head", head)
	if code != 1 {
		t.Fatalf("--expect-head with the tail gone: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"the expected head 116:", "missing", "ends at entry 113", "entries 114 to 116"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
	// The id alone, as Prometheus keeps it, is enough to see it.
	if out, code := cli(t, db, "audit", "verify", "--expect-head", "116"); code != 1 || !strings.Contains(out, "entries 114 to 116") {
		t.Errorf("--expect-head 116: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"head", "116:xyz", "0"} {
		if out, code := cli(t, db, "audit", "verify", "--expect-head", bad); code != 2 || !strings.Contains(out, "is not a head") {
			t.Errorf("--expect-head %q: exit %d, want a usage error\n%s", bad, code, out)
		}
	}
}
