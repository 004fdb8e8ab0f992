package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// auditEntries writes n audit entries (one discard each) and returns the
// head after them.
func auditEntries(t *testing.T, store *storetest.Stores, db *storetest.DB, n int) dlq.AuditHead {
	t.Helper()
	ctx := context.Background()
	for _, id := range insertLetters(t, db, n) {
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "r", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := store.Audit.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// bypassTriggers runs q as a superuser who turned the append-only triggers
// off for one transaction.
func bypassTriggers(t *testing.T, db *storetest.DB, q string, args ...any) {
	t.Helper()
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestAuditHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ATruncatedTailFailsAgainstTheHeadItHad", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		head := auditEntries(t, store, db, 116)
		v, err := store.Audit.VerifyAuditChain(ctx, &head)
		if err != nil || v.Problem != nil || v.Entries != 116 || v.Head != head {
			t.Fatalf("intact: %+v %v", v, err)
		}
		bypassTriggers(t, db, `DELETE FROM audit_events WHERE id > $1`, head.ID-3)

		// On its own the shorter chain verifies: that is the hole.
		if v, err := store.Audit.VerifyAuditChain(ctx, nil); err != nil || v.Problem != nil || v.Entries != 113 {
			t.Fatalf("the truncated chain on its own: %+v %v", v, err)
		}
		v, err = store.Audit.VerifyAuditChain(ctx, &head)
		if err != nil || v.Problem == nil {
			t.Fatalf("truncated tail not found: %+v %v", v, err)
		}
		want := []string{"missing", "ends at entry 113", "entries 114 to 116"}
		for _, w := range want {
			if !strings.Contains(v.Problem.Problem, w) {
				t.Errorf("problem %q does not say %q", v.Problem.Problem, w)
			}
		}
		// A copy of the id alone (the metric) catches it too.
		if v, _ := store.Audit.VerifyAuditChain(ctx, &dlq.AuditHead{ID: head.ID}); v.Problem == nil {
			t.Error("the bare id of a removed head passed")
		}
		// An older copy is still in the chain.
		old := dlq.AuditHead{ID: 100}
		if v, err := store.Audit.VerifyAuditChain(ctx, &old); err != nil || v.Problem != nil {
			t.Errorf("an older head: %+v %v", v, err)
		}
	})

	t.Run("TruncatedThenContinuedIsFound", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		head := auditEntries(t, store, db, 10)
		bypassTriggers(t, db, `DELETE FROM audit_events WHERE id > $1`, head.ID-2)
		after := auditEntries(t, store, db, 2) // links to entry 8, as the chain now ends there
		if v, err := store.Audit.VerifyAuditChain(ctx, nil); err != nil || v.Problem != nil || v.Head != after {
			t.Fatalf("the continued chain on its own: %+v %v", v, err)
		}
		v, err := store.Audit.VerifyAuditChain(ctx, &head)
		if err != nil || v.Problem == nil || !strings.Contains(v.Problem.Problem, "entries 9 to 10") {
			t.Fatalf("removed and continued: %+v %v", v, err)
		}
	})

	t.Run("AReplacedHeadDiffers", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		head := auditEntries(t, store, db, 3)
		// Replace the newest entry with another whose hash matches its
		// content and links to the entry before: the chain checks out, the
		// copy of the head does not.
		bypassTriggers(t, db, `DELETE FROM audit_events WHERE id = $1`, head.ID)
		auditEntries(t, store, db, 1)
		bypassTriggers(t, db, `WITH moved AS (DELETE FROM audit_events WHERE id = (SELECT max(id) FROM audit_events) RETURNING *)
			INSERT INTO audit_events OVERRIDING SYSTEM VALUE
			SELECT $1, at, actor, action, dead_letter_id, operation_id, filter, max_id, counts, reason,
				request_id, remote_addr, user_agent, details, prev_hash, hash FROM moved`, head.ID)
		if v, err := store.Audit.VerifyAuditChain(ctx, nil); err != nil || v.Problem != nil || v.Head.ID != head.ID {
			t.Fatalf("the rewritten chain on its own: %+v %v", v, err)
		}
		v, err := store.Audit.VerifyAuditChain(ctx, &head)
		if err != nil || v.Problem == nil || !strings.Contains(v.Problem.Problem, "replaced") {
			t.Fatalf("replaced head: %+v %v", v, err)
		}
	})

	t.Run("AnEmptyTrail", func(t *testing.T) {
		t.Parallel()
		store, _ := setup(t)
		h, err := store.Audit.AuditHead(ctx)
		if err != nil || h != (dlq.AuditHead{}) {
			t.Fatalf("head of an empty trail: %+v %v", h, err)
		}
		v, err := store.Audit.VerifyAuditChain(ctx, &dlq.AuditHead{ID: 5})
		if err != nil || v.Problem == nil || !strings.Contains(v.Problem.Problem, "empty") {
			t.Fatalf("expected head on an empty trail: %+v %v", v, err)
		}
	})
}

func TestParseAuditHead(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("ab", 32)
	for in, want := range map[string]dlq.AuditHead{
		"116:" + hash:                   {ID: 116, Hash: hash},
		" 116:" + strings.ToUpper(hash): {ID: 116, Hash: hash},
		"7":                             {ID: 7},
	} {
		got, err := dlq.ParseAuditHead(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v; want %+v", in, got, err, want)
		}
		if again, err := dlq.ParseAuditHead(got.String()); err != nil || again != got {
			t.Errorf("%q does not read back: %+v %v", got.String(), again, err)
		}
	}
	for _, in := range []string{"", "0", "-1:" + hash, "x:" + hash, "116:", "116:abc", "116:" + strings.Repeat("zz", 32), "116:" + hash + "00"} {
		if _, err := dlq.ParseAuditHead(in); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("%q: want invalid, got %v", in, err)
		}
	}
}
