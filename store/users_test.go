package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// TestValidatePassword: length is not enough; one character repeated, the
// user's own name and the common passwords are refused, in any case.
func TestValidatePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, pw string
		ok       bool
	}{
		{"alice", "short", false},
		{"alice", "aaaaaaaaaa", false},
		{"alice", "ZZZZZZZZZZZZ", false},
		{"alice", "          ", false},
		{"alice", "password123", false},
		{"alice", "Password123", false},
		{"alice", "QWERTYUIOP", false},
		{"alice", "1234567890", false},
		{"frederick12", "Frederick12", false},
		{"frederick12", " frederick12 ", false},
		{"alice", "tangerine orbit 42", true},
		{"alice", "aaaaaaaaab", true},
		{"", "a long enough password", true},
	} {
		if msg := dlq.ValidatePassword(tc.name, tc.pw); (msg == "") != tc.ok {
			t.Errorf("ValidatePassword(%q, %q) = %q, want ok=%v", tc.name, tc.pw, msg, tc.ok)
		}
	}
	if !dlq.IsCommonPassword("iloveyou12") || dlq.IsCommonPassword("# Common passwords that the length rule alone would let through.") {
		t.Error("the bundled list is not read as a list of passwords")
	}
}

func TestUsersAndTokens(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	s := storetest.NewStores(db.DB)
	ctx, now := context.Background(), time.Now()
	change := dlq.UserChange{Actor: dlq.Actor{Name: "test"}, Now: now}
	hash, err := dlq.HashPassword("root", "a long enough password", 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.HashPassword("root", "short", 4); !errors.Is(err, dlq.ErrInvalid) {
		t.Errorf("a short password: %v", err)
	}

	t.Run("NamesAreUniqueInAnyCase", func(t *testing.T) {
		if _, err := s.Access.CreateUser(ctx, dlq.NewUser{Name: "Root", Role: dlq.RoleAdmin, PasswordHash: hash, Now: now}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Access.CreateUser(ctx, dlq.NewUser{Name: "root", Role: dlq.RoleViewer, PasswordHash: hash, Now: now})
		if !errors.Is(err, dlq.ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		if _, err := s.Access.CreateUser(ctx, dlq.NewUser{Name: "bad name!", Role: dlq.RoleViewer, PasswordHash: hash, Now: now}); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("bad name: %v", err)
		}
	})
	t.Run("TheLastAdminStays", func(t *testing.T) {
		if _, err := s.Access.DisableUser(ctx, "root", change); !errors.Is(err, dlq.ErrLastAdmin) {
			t.Errorf("disable the last admin: %v", err)
		}
		if _, err := s.Access.SetRole(ctx, "root", dlq.RoleViewer, change); !errors.Is(err, dlq.ErrLastAdmin) {
			t.Errorf("demote the last admin: %v", err)
		}
	})
	t.Run("PasswordAndDisableBumpTheEpoch", func(t *testing.T) {
		u, err := s.Access.CreateUser(ctx, dlq.NewUser{Name: "ann", Role: dlq.RoleOperator, PasswordHash: hash, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if !dlq.CheckPassword(&u, "a long enough password") || dlq.CheckPassword(&u, "wrong") || dlq.CheckPassword(nil, "a long enough password") {
			t.Error("CheckPassword")
		}
		u2, err := s.Access.SetPassword(ctx, "ANN", hash, change)
		if err != nil || u2.SessionEpoch <= u.SessionEpoch {
			t.Fatalf("set password: %v, epoch %d → %d", err, u.SessionEpoch, u2.SessionEpoch)
		}
		u3, err := s.Access.DisableUser(ctx, "ann", change)
		if err != nil || u3.SessionEpoch <= u2.SessionEpoch || u3.Active() || dlq.CheckPassword(&u3, "a long enough password") {
			t.Fatalf("disable: %v %+v", err, u3)
		}
		if _, err := s.Access.SetPassword(ctx, "nobody", hash, change); !errors.Is(err, dlq.ErrNotFound) {
			t.Errorf("unknown user: %v", err)
		}
	})
	t.Run("TokensByHashOnlyWhileActive", func(t *testing.T) {
		secret, err := dlq.NewTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Access.CreateToken(ctx, dlq.NewToken{UserName: "root", Label: "ci", Hash: dlq.HashToken(secret), Now: now}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Access.CreateToken(ctx, dlq.NewToken{UserName: "root", Label: "CI", Hash: dlq.HashToken(secret + "x"), Now: now}); !errors.Is(err, dlq.ErrConflict) {
			t.Errorf("a second active token labelled ci: %v", err)
		}
		if _, err := s.Access.CreateToken(ctx, dlq.NewToken{UserName: "ann", Hash: dlq.HashToken("y"), Now: now}); !errors.Is(err, dlq.ErrInvalid) {
			t.Errorf("a token for a disabled user: %v", err)
		}
		u, tok, err := s.Access.UserByToken(ctx, dlq.HashToken(secret), now)
		if err != nil || u.Name != "Root" || tok.Label != "ci" {
			t.Fatalf("by token: %v %s %s", err, u.Name, tok.Label)
		}
		var stored []byte
		if err := db.Get(&stored, `SELECT token_hash FROM api_tokens WHERE label = 'ci'`); err != nil || string(stored) == secret {
			t.Error("the token itself must not be stored")
		}
		if _, err := s.Access.RevokeToken(ctx, "ci", dlq.Actor{Name: "test"}, now); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Access.UserByToken(ctx, dlq.HashToken(secret), now); !errors.Is(err, dlq.ErrNotFound) {
			t.Errorf("a revoked token: %v", err)
		}
	})
	t.Run("ChangesAreAudited", func(t *testing.T) {
		var details []json.RawMessage
		if err := db.Select(&details, `SELECT details FROM audit_events WHERE action IN ('user_change', 'token_change') ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		if len(details) < 6 {
			t.Errorf("%d user and token changes audited", len(details))
		}
		if n, problem, err := s.Audit.VerifyAudit(ctx); err != nil || problem != nil || n == 0 {
			t.Errorf("audit chain: %d %v %v", n, problem, err)
		}
	})
}
