package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

func TestActionKeyBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AnotherTargetIsAKeyReuseError", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		ids := insertLetters(t, db, 2)
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[0], Actor: alice, Reason: "r", Now: time.Now(), Key: "k"}); err != nil {
			t.Fatal(err)
		}
		_, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: ids[1], Actor: alice, Reason: "r", Now: time.Now(), Key: "k"})
		var reuse *dlq.KeyReuseError
		if !errors.As(err, &reuse) || !errors.Is(err, dlq.ErrInvalid) {
			t.Fatalf("want a *KeyReuseError, got %v", err)
		}
		if n := count(t, db, `SELECT count(*) FROM dead_letters WHERE id = $1 AND discarded_at IS NULL`, ids[1]); n != 1 {
			t.Fatal("the second letter was discarded")
		}
	})

	// Keys without request_hash have no digest; they still repeat their
	// first answer for the same actor and action.
	t.Run("AKeyWithoutADigestKeepsTheOldCheck", func(t *testing.T) {
		t.Parallel()
		store, db := setup(t)
		id := insertLetters(t, db, 1)[0]
		if _, err := db.Exec(`INSERT INTO action_keys (key, actor, action, status, result)
			VALUES ('old', 'alice', 'discard', 200, '{"audit_event_id": 42}')`); err != nil {
			t.Fatal(err)
		}
		auditID, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: alice, Reason: "r", Now: time.Now(), Key: "old"})
		if err != nil || auditID != 42 {
			t.Fatalf("old key: %d %v; want the stored answer 42", auditID, err)
		}
		_, err = store.Operations.RestoreDeadLetter(ctx, dlq.RestoreParams{ID: id, Actor: alice, Now: time.Now(), Key: "old"})
		if !errors.As(err, new(*dlq.KeyReuseError)) {
			t.Fatalf("old key for another action: %v", err)
		}
	})
}
