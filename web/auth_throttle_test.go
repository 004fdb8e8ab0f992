package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/web/webtest"
)

// signInFrom sends one sign-in form for name from addr, from a browser
// that has just opened the sign-in page.
func (e env) signInFrom(t *testing.T, addr, name, password string) *httptest.ResponseRecorder {
	t.Helper()
	s := webtest.Visit(t, e.h)
	req := request("POST", "/login", form("username", name, "password", password, "_csrf", s.CSRF))
	req.RemoteAddr = addr + ":40000"
	return s.Do(e.h, req)
}

// TestSignInAttackerCannotLockOutUser: guessing alice's password from one
// address slows and then locks that address, but alice signs in at once
// from the address she uses, and from a new one too.
func TestSignInAttackerCannotLockOutUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "alice", dlq.RoleAdmin)
	const home, attacker, elsewhere = "203.0.113.10", "198.51.100.7", "192.0.2.99"
	if rec := e.signInFrom(t, home, "alice", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Fatalf("alice's first sign-in: %d", rec.Code)
	}
	e.clock.Add(time.Minute)
	// Forty guesses, one every ten seconds: slowed, then locked, again and again.
	throttled := 0
	for range 40 {
		if e.signInFrom(t, attacker, "alice", "not her password").Code == http.StatusTooManyRequests {
			throttled++
		}
		e.clock.Add(10 * time.Second)
	}
	if throttled == 0 {
		t.Fatal("forty wrong passwords from one address were never throttled")
	}
	if rec := e.signInFrom(t, attacker, "alice", webtest.Password); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the attacker's address, with the right password: %d, want 429 (that address is locked)", rec.Code)
	}
	if rec := e.signInFrom(t, home, "alice", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Errorf("alice from her usual address during the attack: %d, want signed in\n%.300s", rec.Code, rec.Body.String())
	}
	if rec := e.signInFrom(t, elsewhere, "alice", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Errorf("alice from a new address during a one-address attack: %d, want signed in", rec.Code)
	}
}

// TestSignInDistributedGuessingSlowed: guesses for one name from many
// addresses, one each, are slowed from the tenth on with a wait that
// doubles, and never locked; the user's own address is spared the wait.
func TestSignInDistributedGuessingSlowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "bob", dlq.RoleOperator)
	const home = "203.0.113.20"
	if rec := e.signInFrom(t, home, "bob", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Fatalf("bob's first sign-in: %d", rec.Code)
	}
	e.clock.Add(time.Minute)
	bot := 0
	guess := func() *httptest.ResponseRecorder {
		bot++
		return e.signInFrom(t, fmt.Sprintf("198.51.100.%d", bot), "bob", "guess number "+strconv.Itoa(bot))
	}
	for i := range 10 {
		if rec := guess(); rec.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d from a fresh address: %d, want 401 (checked)", i+1, rec.Code)
		}
	}
	rec := guess()
	if rec.Code != http.StatusTooManyRequests || strings.Contains(rec.Body.String(), "locked") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("guess 11 from yet another address: %d %q, want 429 wait, not a lock", rec.Code, rec.Header().Get("Retry-After"))
	}
	first, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec := e.signInFrom(t, home, "bob", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Errorf("bob from his usual address: %d, want signed in", rec.Code)
	}
	e.clock.Add(61 * time.Second)
	if rec := guess(); rec.Code != http.StatusUnauthorized {
		t.Fatalf("a guess after the wait: %d, want checked (slowed, never locked)", rec.Code)
	}
	rec = guess()
	second, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != http.StatusTooManyRequests || second <= first {
		t.Errorf("the next guess: %d, Retry-After %d after %d, want 429 with a longer wait", rec.Code, second, first)
	}
}

// TestSignInParallelGuessesCountedFirst: thirty sign-ins for different
// names from one address, all at once, get no more password checks than
// the address may have before it is slowed.
func TestSignInParallelGuessesCountedFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := webtest.Visit(t, e.h)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			req := request("POST", "/login", form("username", fmt.Sprintf("name%d", i), "password", "a wrong password", "_csrf", s.CSRF))
			req.RemoteAddr = "198.51.100.9:5000"
			for _, c := range s.Cookies {
				req.AddCookie(c)
			}
			e.h.ServeHTTP(httptest.NewRecorder(), req)
		})
	}
	wg.Wait()
	checked := e.count(t, `SELECT count(*) FROM login_attempts WHERE outcome IN ('failed', 'succeeded')`)
	if limit := (auth.Throttle{}).Defaults().AddrSlowAfter; checked > limit {
		t.Errorf("%d passwords checked for one address at once, want at most %d", checked, limit)
	}
}
