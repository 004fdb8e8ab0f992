package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/auth"
	"github.com/redrive/redrive/web/webtest"
)

// TestCSRF: a cookie-authenticated change without the CSRF token, with a
// wrong one, or from another site is refused with 403 and changes
// nothing; the same change with the token, or with an API token and no
// CSRF token at all, goes through.
func TestCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	s := e.as(t, "op", dlq.RoleOperator)
	discard := func(header ...string) *httptest.ResponseRecorder {
		req := request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"noise"}`)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return s.Do(e.h, req)
	}
	for _, tc := range []struct {
		name   string
		header []string
	}{
		{"Missing", []string{"X-CSRF-Token", " "}},
		{"Wrong", []string{"X-CSRF-Token", "not-the-token"}},
		{"SameOriginFetchMetadataIsNoSubstitute", []string{"X-CSRF-Token", " ", "Sec-Fetch-Site", "same-origin"}},
		{"CrossSiteEvenWithTheToken", []string{"Sec-Fetch-Site", "cross-site"}},
	} {
		before := e.state(t)
		if rec := discard(tc.header...); rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, rec.Code)
		}
		if after := e.state(t); after != before {
			t.Errorf("%s: the database changed", tc.name)
		}
	}
	// A form without _csrf, from a page.
	before := e.state(t)
	req := request("POST", fmt.Sprintf("/dead-letters/%d/discard", id), form("reason", "noise"))
	req.Header.Set("X-CSRF-Token", " ")
	if rec := s.Do(e.h, req); rec.Code != http.StatusForbidden {
		t.Errorf("form without token: %d, want 403", rec.Code)
	}
	if e.state(t) != before {
		t.Error("form without token changed the database")
	}
	if rec := discard(); rec.Code != http.StatusOK {
		t.Fatalf("with the token: %d %s", rec.Code, rec.Body.String())
	}

	// A bearer token carries no ambient authority: no CSRF token needed.
	id2 := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	tok := webtest.Token(t, e.store.Access, "op")
	rec := e.do("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id2), `{"reason":"noise"}`, "Authorization", "Bearer "+tok)
	if rec.Code != http.StatusOK {
		t.Fatalf("bearer without CSRF: %d %s", rec.Code, rec.Body.String())
	}
	// Signing in needs the token too (login CSRF).
	rec = e.do("POST", "/login", form("username", "op", "password", webtest.Password))
	if rec.Code != http.StatusForbidden {
		t.Errorf("sign-in without CSRF token: %d, want 403", rec.Code)
	}
}

// TestSessionCookie: the session cookie is HttpOnly and SameSite=Lax
// (Secure over TLS); a tampered cookie, one signed with an unknown key, an
// expired or an idle one signs the requester out; a rotated key still
// reads old cookies.
func TestSessionCookie(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	e := newEnv(t, func(c *web.Config) { c.Auth.SessionKeys = [][]byte{oldKey} })
	webtest.CreateUser(t, e.store.Access, "ann", dlq.RoleViewer)
	s := webtest.SignIn(t, e.h, "ann", webtest.Password)
	cookie := s.Cookies["redrive_session"]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Secure {
		t.Errorf("session cookie flags: HttpOnly=%v SameSite=%v Secure=%v", cookie.HttpOnly, cookie.SameSite, cookie.Secure)
	}
	signedIn := func(h http.Handler, c *http.Cookie) bool {
		req := httptest.NewRequest("GET", "/", nil)
		req.AddCookie(c)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code == http.StatusOK
	}
	if !signedIn(e.h, cookie) {
		t.Fatal("the fresh session does not work")
	}

	t.Run("Tampered", func(t *testing.T) {
		bad := *cookie
		b := []byte(bad.Value)
		b[len(b)/2] ^= 1
		bad.Value = string(b)
		req := httptest.NewRequest("GET", "/", nil)
		req.AddCookie(&bad)
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("tampered cookie: %d, want a redirect to sign in", rec.Code)
		}
		if !strings.Contains(rec.Header().Get("Set-Cookie"), "redrive_session=;") {
			t.Errorf("tampered cookie not cleared: %q", rec.Header().Values("Set-Cookie"))
		}
	})
	t.Run("KeyRotation", func(t *testing.T) {
		rotated, err := web.NewServer(web.Config{DB: e.store.DB, Auth: auth.Config{SessionKeys: [][]byte{newKey, oldKey}}})
		if err != nil {
			t.Fatal(err)
		}
		if !signedIn(rotated, cookie) {
			t.Error("a cookie signed with the old key stops working while the old key is still listed")
		}
		dropped, err := web.NewServer(web.Config{DB: e.store.DB, Auth: auth.Config{SessionKeys: [][]byte{newKey}}})
		if err != nil {
			t.Fatal(err)
		}
		if signedIn(dropped, cookie) {
			t.Error("a cookie signed with a dropped key still works")
		}
	})
	t.Run("IdleThenExpired", func(t *testing.T) {
		e := newEnv(t)
		webtest.CreateUser(t, e.store.Access, "bob", dlq.RoleViewer)
		s := webtest.SignIn(t, e.h, "bob", webtest.Password)
		get := func() int { return s.Do(e.h, httptest.NewRequest("GET", "/", nil)).Code }
		// Active every 50 minutes: the idle hour never runs out ...
		for range 5 {
			e.clock.Add(50 * time.Minute)
			if code := get(); code != http.StatusOK {
				t.Fatalf("active session signed out after %d", code)
			}
		}
		// ... but 12 hours after sign-in the session ends regardless.
		for range 10 {
			e.clock.Add(50 * time.Minute)
			get()
		}
		if code := get(); code != http.StatusSeeOther {
			t.Fatalf("a session over 12 hours old: %d, want signed out", code)
		}
		s = webtest.SignIn(t, e.h, "bob", webtest.Password)
		e.clock.Add(61 * time.Minute)
		if code := get(); code != http.StatusSeeOther {
			t.Fatalf("a session idle for over an hour: %d, want signed out", code)
		}
	})
	t.Run("SignOutClearsIt", func(t *testing.T) {
		s := webtest.SignIn(t, e.h, "ann", webtest.Password)
		rec := s.Do(e.h, request("POST", "/logout", ""))
		if rec.Code != http.StatusSeeOther || s.Cookies["redrive_session"] != nil {
			t.Fatalf("sign out: %d, cookie left %v", rec.Code, s.Cookies["redrive_session"])
		}
	})
	t.Run("FreshSessionOnSignIn", func(t *testing.T) {
		s1 := webtest.SignIn(t, e.h, "ann", webtest.Password)
		e.clock.Add(2 * time.Second)
		// Sign in again on top of the first session: a new cookie.
		form := form("username", "ann", "password", webtest.Password, "_csrf", s1.CSRF)
		before := s1.Cookies["redrive_session"].Value
		if rec := s1.Do(e.h, request("POST", "/login", form)); rec.Code != http.StatusSeeOther {
			t.Fatalf("second sign-in: %d", rec.Code)
		}
		if s1.Cookies["redrive_session"].Value == before {
			t.Error("signing in kept the session cookie it came with")
		}
		old := s1.CSRF
		s1.Load(t, e.h, "/workers")
		if s1.CSRF == old {
			t.Error("signing in kept the old CSRF token")
		}
	})
}

// TestLiveSessionsEnd: disabling a user or changing their password ends
// the sessions they have, on their very next request; a role change takes
// effect at once.
func TestLiveSessionsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, change := context.Background(), dlq.UserChange{Actor: dlq.Actor{Name: "test"}, Now: time.Now()}
	webtest.CreateUser(t, e.store.Access, "admin", dlq.RoleAdmin)
	webtest.CreateUser(t, e.store.Access, "carl", dlq.RoleOperator)
	s := webtest.SignIn(t, e.h, "carl", webtest.Password)
	tok := webtest.Token(t, e.store.Access, "carl")
	page := func() int { return s.Do(e.h, httptest.NewRequest("GET", "/", nil)).Code }
	api := func() int {
		return e.do("GET", "/api/v1/dead-letters", "", "Authorization", "Bearer "+tok).Code
	}
	if page() != http.StatusOK || api() != http.StatusOK {
		t.Fatal("session or token does not work")
	}
	if _, err := e.store.Access.SetRole(ctx, "carl", dlq.RoleViewer, change); err != nil {
		t.Fatal(err)
	}
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	if code := s.Do(e.h, request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"x"}`)).Code; code != http.StatusForbidden {
		t.Errorf("demoted to viewer, yet a discard answered %d", code)
	}
	if _, err := e.store.Access.DisableUser(ctx, "carl", change); err != nil {
		t.Fatal(err)
	}
	if code := page(); code != http.StatusSeeOther {
		t.Errorf("disabled user's session: %d, want signed out", code)
	}
	e.clock.Add(auth.TokenWindow) // a change from outside the console waits out the token window
	if code := api(); code != http.StatusUnauthorized {
		t.Errorf("disabled user's token: %d, want 401", code)
	}
	if rec := e.do("GET", "/login", ""); rec.Code != http.StatusOK {
		t.Fatal(rec.Code)
	}
	// Enabled again: the old session stays over (epoch), a new sign-in works.
	if _, err := e.store.Access.EnableUser(ctx, "carl", change); err != nil {
		t.Fatal(err)
	}
	if code := page(); code != http.StatusSeeOther {
		t.Errorf("re-enabled user's old session: %d, want still signed out", code)
	}
	s = webtest.SignIn(t, e.h, "carl", webtest.Password)
	hash, _ := dlq.HashPassword("carl", "a brand new password", 4)
	if _, err := e.store.Access.SetPassword(ctx, "carl", hash, change); err != nil {
		t.Fatal(err)
	}
	if code := page(); code != http.StatusSeeOther {
		t.Errorf("session after a password change: %d, want signed out", code)
	}
}

// TestSignInThrottle: repeated failures for a name are slowed, then locked
// (429 with Retry-After, even for the right password); the lock passes with
// time; a wrong name and a wrong password read the same; every checked
// attempt is in the audit trail.
func TestSignInThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "dora", dlq.RoleViewer)
	s := webtest.Visit(t, e.h)
	try := func(name, pw string) *httptest.ResponseRecorder {
		return s.Do(e.h, request("POST", "/login", form("username", name, "password", pw, "_csrf", s.CSRF)))
	}
	unknown, wrong := try("nobody", "whatever password"), try("dora", "wrong password!")
	if unknown.Code != http.StatusUnauthorized || wrong.Code != http.StatusUnauthorized {
		t.Fatalf("failures: %d and %d, want 401", unknown.Code, wrong.Code)
	}
	if !strings.Contains(wrong.Body.String(), "Wrong username or password.") || !strings.Contains(unknown.Body.String(), "Wrong username or password.") {
		t.Error("an unknown name and a wrong password must read the same")
	}
	try("dora", "wrong password!")
	try("dora", "wrong password!") // third failure: slowed from here
	rec := try("dora", webtest.Password)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "Wait") {
		t.Fatalf("after 3 failures at once: %d %q, want 429 wait", rec.Code, rec.Header().Get("Retry-After"))
	}
	e.clock.Add(3 * time.Second)
	try("dora", "wrong password!") // fourth
	e.clock.Add(5 * time.Second)
	try("dora", "wrong password!") // fifth: locked
	e.clock.Add(10 * time.Minute)
	rec = try("dora", webtest.Password)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "locked") {
		t.Fatalf("locked, with the right password: %d, want 429 locked\n%.500s", rec.Code, rec.Body.String())
	}
	e.clock.Add(6 * time.Minute)
	if rec := try("dora", webtest.Password); rec.Code != http.StatusSeeOther {
		t.Fatalf("after the lock: %d, want signed in", rec.Code)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_events WHERE action = 'sign_in_failed'`); n != 6 {
		t.Errorf("%d failed sign-ins audited, want 6", n)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_events WHERE action = 'sign_in' AND actor = 'dora'`); n != 1 {
		t.Errorf("%d successful sign-ins audited, want 1", n)
	}
}

// TestSignInNext: after signing in, next goes only to a path of this site.
func TestSignInNext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "eve", dlq.RoleViewer)
	for next, want := range map[string]string{
		"https://evil.example":   "/",
		"//evil.example":         "/",
		"/\\evil.example":        "/",
		"javascript:alert(1)":    "/",
		"/dead-letters?q=a%20b":  "/dead-letters?q=a%20b",
		"/jobs?state=dead#first": "/jobs?state=dead#first",
	} {
		s := webtest.Visit(t, e.h)
		rec := s.Do(e.h, request("POST", "/login", form("username", "eve", "password", webtest.Password,
			"_csrf", s.CSRF, "next", next)))
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != want {
			t.Errorf("next=%q: %d to %q, want %q", next, rec.Code, rec.Header().Get("Location"), want)
		}
	}
	// A page asked for while signed out comes back after sign-in.
	rec := e.do("GET", "/dead-letters?status=all", "")
	if loc := rec.Header().Get("Location"); loc != "/login?next=%2Fdead-letters%3Fstatus%3Dall" {
		t.Errorf("redirect to sign in: %q", loc)
	}
}

// TestProxySSO: the SSO header signs in only from a trusted proxy's TCP
// address (never from X-Forwarded-For), with the mapped or default role;
// only a trusted proxy's X-Forwarded-For sets the client address.
func TestProxySSO(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		c.Auth.AuthHeader = "X-Forwarded-Email"
		c.Auth.ProxyRoles = map[string]dlq.Role{"alice@x.com": dlq.RoleOperator}
	})
	get := func(remote, email string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/dead-letters", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-Email", email)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	if rec := get("10.1.2.3:5555", "alice@x.com"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "alice@x.com (operator)") {
		t.Errorf("from the proxy: %d, want signed in as the operator alice", rec.Code)
	}
	if rec := get("10.1.2.3:5555", "bob@x.com"); !strings.Contains(rec.Body.String(), "bob@x.com (viewer)") {
		t.Error("an unmapped SSO user should get the default role, viewer")
	}
	if rec := get("192.0.2.7:5555", "alice@x.com"); rec.Code != http.StatusSeeOther {
		t.Errorf("the header from an untrusted address: %d, want it ignored (sign-in redirect)", rec.Code)
	}
	if rec := get("192.0.2.7:5555", "alice@x.com", "X-Forwarded-For", "10.1.2.3"); rec.Code != http.StatusSeeOther {
		t.Errorf("an untrusted peer claiming the proxy in X-Forwarded-For: %d, want ignored", rec.Code)
	}
	// A disabled local user of the same name is shut out.
	webtest.CreateUser(t, e.store.Access, "mallory@x.com", dlq.RoleAdmin)
	webtest.CreateUser(t, e.store.Access, "keeper", dlq.RoleAdmin)
	if _, err := e.store.Access.DisableUser(context.Background(), "mallory@x.com", dlq.UserChange{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if rec := get("10.1.2.3:5555", "mallory@x.com"); rec.Code != http.StatusForbidden {
		t.Errorf("disabled user through SSO: %d, want 403", rec.Code)
	}

	// The audit trail's address: the client the proxy names, never one a
	// client names itself.
	addr := func(remote, xff string) string {
		s := &webtest.Session{Cookies: map[string]*http.Cookie{}}
		req := httptest.NewRequest("GET", "/login", nil)
		req.RemoteAddr = remote
		token := webtest.PageToken(s.Do(e.h, req).Body.String())
		req = request("POST", "/login", form("username", "nobody", "password", "wrong password", "_csrf", token))
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", xff)
		s.Do(e.h, req)
		var got string
		if err := e.db.Get(&got, `SELECT remote_addr FROM audit_events WHERE action = 'sign_in_failed' ORDER BY id DESC LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := addr("10.9.9.9:1", "203.0.113.5"); got != "203.0.113.5" {
		t.Errorf("behind the trusted proxy the client is %q, want 203.0.113.5", got)
	}
	if got := addr("198.51.100.1:1", "203.0.113.5"); got != "198.51.100.1" {
		t.Errorf("a direct client naming itself in X-Forwarded-For is %q, want its TCP address", got)
	}
}

// TestSecurityHeaders: every page carries the CSP (no inline script, no
// framing), nosniff and the referrer policy; HSTS only over HTTPS.
func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	s := e.as(t, "admin", dlq.RoleAdmin)
	paths := []string{"/", "/dead-letters", fmt.Sprintf("/dead-letters/%d", id), "/groups", "/jobs", "/workers",
		"/audit", "/admin/users", "/dead-letters/999999", "/api/v1/dead-letters"}
	check := func(name string, rec *httptest.ResponseRecorder) {
		h := rec.Header()
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", name, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: nosniff %q, referrer %q, frame %q", name, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"), h.Get("X-Frame-Options"))
		}
		if h.Get("Strict-Transport-Security") != "" {
			t.Errorf("%s: HSTS over plain HTTP", name)
		}
	}
	for _, p := range paths {
		check(p, s.Do(e.h, httptest.NewRequest("GET", p, nil)))
	}
	check("/login", e.do("GET", "/login", ""))
	check("anonymous /", e.do("GET", "/", ""))

	tls := httptest.NewRequest("GET", "https://console.example/login", nil)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, tls)
	if rec.Header().Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS over TLS")
	}
	proxied := func(remote string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/login", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-Proto", "https")
		rec := httptest.NewRecorder()
		e.h.ServeHTTP(rec, req)
		return rec
	}
	if proxied("10.0.0.2:1").Header().Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS behind a trusted proxy that terminated TLS")
	}
	if proxied("192.0.2.1:1").Header().Get("Strict-Transport-Security") != "" {
		t.Error("HSTS because an untrusted client said https")
	}
	if c := proxied("10.0.0.2:1").Result().Cookies(); len(c) == 0 || !c[0].Secure {
		t.Error("cookies set behind a TLS-terminating trusted proxy must be Secure")
	}
}

// TestBodyLimit: a body over the limit is refused with 413.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) { c.BodyLimit = "1K" })
	webtest.CreateUser(t, e.store.Access, "op", dlq.RoleOperator)
	tok := webtest.Token(t, e.store.Access, "op")
	body := `{"task":"x","args":["` + strings.Repeat("a", 4096) + `"]}`
	rec := e.do("POST", "/api/v1/jobs", body, "Authorization", "Bearer "+tok)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("%d, want 413", rec.Code)
	}
}

// TestBearerTokens: a token acts with its user's role; none or a bad one
// is 401 JSON, a revoked one too; its use is noted.
func TestBearerTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "ci", dlq.RoleViewer)
	tok := webtest.Token(t, e.store.Access, "ci")
	get := func(auth string) *httptest.ResponseRecorder {
		return e.do("GET", "/api/v1/dead-letters", "", "Authorization", auth)
	}
	if rec := get("Bearer " + tok); rec.Code != http.StatusOK {
		t.Fatalf("token: %d", rec.Code)
	}
	for _, auth := range []string{"", "Bearer ", "Bearer rdv_nonsense", "Basic Y2k6cGFzcw==", "Bearer " + tok + "x"} {
		rec := get(auth)
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		if rec.Code != http.StatusUnauthorized || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code == "" {
			t.Errorf("Authorization %q: %d %s, want 401 JSON", auth, rec.Code, rec.Body.String())
		}
	}
	var used int
	if err := e.db.Get(&used, `SELECT count(*) FROM api_tokens WHERE last_used_at IS NOT NULL`); err != nil || used != 1 {
		t.Errorf("last use not noted: %d %v", used, err)
	}
	tokens, _ := e.store.Access.Tokens(context.Background())
	if _, err := e.store.Access.RevokeToken(context.Background(), fmt.Sprint(tokens[0].ID), dlq.Actor{Name: "test"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Revoked through another store than the console's own: it takes
	// effect once the token window has passed (TestTokenWindow).
	e.clock.Add(auth.TokenWindow)
	if rec := get("Bearer " + tok); rec.Code != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", rec.Code)
	}
}

// TestMetricsToken: with a metrics token set, /metrics needs it.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	open := newEnv(t)
	if rec := open.do("GET", "/metrics", ""); rec.Code != http.StatusOK {
		t.Errorf("metrics without a token configured: %d", rec.Code)
	}
	e := newEnv(t, func(c *web.Config) { c.Auth.MetricsToken = "scrape-me" })
	if rec := e.do("GET", "/metrics", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("metrics without the token: %d, want 401", rec.Code)
	}
	if rec := e.do("GET", "/metrics", "", "Authorization", "Bearer wrong"); rec.Code != http.StatusUnauthorized {
		t.Errorf("metrics with a wrong token: %d, want 401", rec.Code)
	}
	if rec := e.do("GET", "/metrics", "", "Authorization", "Bearer scrape-me"); rec.Code != http.StatusOK {
		t.Errorf("metrics with the token: %d", rec.Code)
	}
}
