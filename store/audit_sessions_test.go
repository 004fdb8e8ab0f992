package store_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
)

// TestAuditHideSessions: hide_sign_ins leaves out sign-ins, failed
// sign-ins and a user's own "sign out everywhere", and keeps everything
// else, an admin ending someone else's sessions included; it survives the
// round trip through the query string (pages, exports).
func TestAuditHideSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, db := setup(t)
	now := time.Now().UTC()
	admin := dlq.Actor{Name: "root"}
	for _, name := range []string{"root", "alice"} {
		if _, err := store.Access.CreateUser(ctx, dlq.NewUser{Name: name, Role: dlq.RoleAdmin, PasswordHash: []byte("x"), Actor: admin, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	signIn := func(name string, outcome dlq.LoginOutcome) {
		id, _, err := store.Access.StartLoginAttempt(ctx, dlq.LoginAttempt{Name: name, Addr: "10.0.0.1", Now: now, Since: now.Add(-time.Hour),
			NameSince: now.Add(-time.Hour), KnownSince: now.Add(-time.Hour), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Access.FinishLoginAttempt(ctx, dlq.LoginResult{AttemptID: id, Outcome: outcome, Name: name, Actor: dlq.Actor{Name: name}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	signIn("alice", dlq.LoginFailed)
	signIn("alice", dlq.LoginSucceeded)
	letter := insertLetters(t, db, 1)[0]
	if _, err := store.Operations.ReplayDeadLetter(ctx, dlq.ReplayParams{ID: letter, Actor: dlq.Actor{Name: "alice"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Access.EndSessions(ctx, "alice", dlq.UserChange{Actor: dlq.Actor{Name: "Alice"}, Now: now}); err != nil { // her own
		t.Fatal(err)
	}
	if _, err := store.Access.EndSessions(ctx, "alice", dlq.UserChange{Actor: admin, Now: now}); err != nil { // an admin's doing
		t.Fatal(err)
	}

	list := func(q string) []string {
		t.Helper()
		v, _ := url.ParseQuery(q)
		f, err := handlers.ParseAuditFilter(v, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Values().Encode(); got != v.Encode() {
			t.Errorf("the filter %q reads back as %q", q, got)
		}
		page, err := store.Audit.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range page.Entries {
			out = append(out, e.Actor+" "+e.Action)
		}
		slices.Reverse(out)
		return out
	}
	all := list("")
	if want := []string{"root user_change", "root user_change", "alice sign_in_failed", "alice sign_in", "alice replay",
		"Alice user_change", "root user_change"}; !slices.Equal(all, want) {
		t.Fatalf("the whole trail: %q, want %q", all, want)
	}
	if got, want := list("hide_sign_ins=1"), []string{"root user_change", "root user_change", "alice replay", "root user_change"}; !slices.Equal(got, want) {
		t.Errorf("hiding sign-ins: %q, want %q", got, want)
	}
	if got, want := list("actor=alice&hide_sign_ins=1"), []string{"alice replay"}; !slices.Equal(got, want) {
		t.Errorf("alice's entries without sign-ins: %q, want %q", got, want)
	}
	for _, bad := range []string{"yes", "2"} {
		if _, err := handlers.ParseAuditFilter(url.Values{"hide_sign_ins": {bad}}, now); err == nil {
			t.Errorf("hide_sign_ins=%s was accepted", bad)
		}
	}
}
