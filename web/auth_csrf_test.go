package web_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// TestCSRFBoundToSession: the CSRF token belongs to the signed session.
// A planted _csrf cookie with the same value in the form, another
// session's token, and a valid token sent from another origin or site are
// all refused; an API token needs none of it.
func TestCSRFBoundToSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "pat", dlq.RoleOperator)
	planted := &http.Cookie{Name: "_csrf", Value: "planted-by-the-attacker"}

	// Login CSRF: signing the victim in as someone else with a planted token.
	req := request("POST", "/login", form("username", "pat", "password", webtest.Password, "_csrf", planted.Value))
	req.AddCookie(planted)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("sign-in with a planted _csrf cookie and field: %d, want 403", rec.Code)
	}

	s := webtest.SignIn(t, e.h, "pat", webtest.Password)
	other := webtest.SignIn(t, e.h, "pat", webtest.Password)
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	discard := func(s *webtest.Session, header ...string) int {
		req := request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"noise"}`)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return s.Do(e.h, req).Code
	}
	withPlanted := &webtest.Session{Cookies: maps.Clone(s.Cookies), CSRF: planted.Value}
	withPlanted.Cookies[planted.Name] = planted
	for _, tc := range []struct {
		name   string
		s      *webtest.Session
		header []string
	}{
		{"PlantedCookieAndHeader", withPlanted, nil},
		{"AnotherSessionsToken", s, []string{"X-CSRF-Token", other.CSRF}},
		{"ValidTokenFromAnotherOrigin", s, []string{"Origin", "http://evil.example"}},
		{"ValidTokenFromAnOpaqueOrigin", s, []string{"Origin", "null"}},
		{"ValidTokenFromASiblingSite", s, []string{"Sec-Fetch-Site", "same-site"}},
		{"ValidTokenCrossSite", s, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}},
	} {
		before := e.state(t)
		if code := discard(tc.s, tc.header...); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tc.name, code)
		}
		if e.state(t) != before {
			t.Errorf("%s: the database changed", tc.name)
		}
	}
	if code := discard(s, "Origin", "http://example.com", "Sec-Fetch-Site", "same-origin"); code != http.StatusOK {
		t.Fatalf("the session's own token from its own origin: %d", code)
	}
	// Behind a trusted proxy that rewrote Host, the Origin is compared with
	// the host the proxy names; from anyone else that header is ignored.
	proxied := newEnv(t, func(c *web.Config) {
		c.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	webtest.CreateUser(t, proxied.store.Access, "pat", dlq.RoleOperator)
	ps := webtest.SignIn(t, proxied.h, "pat", webtest.Password)
	idp := storetest.InsertDeadLetter(t, proxied.db.DB, storetest.Letter{})
	viaProxy := func(remote string) int {
		req := request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", idp), `{"reason":"noise"}`)
		req.Host = "127.0.0.1:8080"
		req.RemoteAddr = remote
		req.Header.Set("Origin", "https://console.example")
		req.Header.Set("X-Forwarded-Host", "console.example")
		return ps.Do(proxied.h, req).Code
	}
	if code := viaProxy("192.0.2.50:1"); code != http.StatusForbidden {
		t.Errorf("X-Forwarded-Host from an untrusted client: %d, want 403", code)
	}
	if code := viaProxy("10.0.0.2:1"); code != http.StatusOK {
		t.Errorf("from a trusted proxy that rewrote Host: %d, want 200", code)
	}

	// An API client is not a browser: no CSRF token, whatever Origin says.
	id = storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	tok := webtest.Token(t, e.store.Access, "pat")
	rec = e.do("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"noise"}`,
		"Authorization", "Bearer "+tok, "Origin", "http://evil.example")
	if rec.Code != http.StatusOK {
		t.Errorf("bearer token: %d %s", rec.Code, rec.Body.String())
	}
}

// TestSessionCookieHostPrefix: over HTTPS the session cookie is named
// __Host- (Secure, Path=/, no Domain), so a sibling subdomain cannot set
// or overwrite it; the session works under that name.
func TestSessionCookieHostPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	webtest.CreateUser(t, e.store.Access, "quinn", dlq.RoleViewer)
	s := &webtest.Session{Cookies: map[string]*http.Cookie{}}
	rec := s.Do(e.h, httptest.NewRequest("GET", "https://console.example/login", nil))
	s.CSRF = webtest.PageToken(rec.Body.String())
	req := request("POST", "https://console.example/login", form("username", "quinn", "password", webtest.Password, "_csrf", s.CSRF))
	if rec := s.Do(e.h, req); rec.Code != http.StatusSeeOther {
		t.Fatalf("sign in over HTTPS: %d", rec.Code)
	}
	c := s.Cookies["__Host-"+webtest.SessionCookie]
	if c == nil {
		t.Fatalf("no __Host- session cookie over HTTPS; cookies %v", slices.Collect(maps.Keys(s.Cookies)))
	}
	if !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Errorf("__Host- cookie: Secure=%v Path=%q Domain=%q HttpOnly=%v", c.Secure, c.Path, c.Domain, c.HttpOnly)
	}
	if rec := s.Do(e.h, httptest.NewRequest("GET", "https://console.example/workers", nil)); rec.Code != http.StatusOK {
		t.Errorf("a page over HTTPS with the __Host- cookie: %d", rec.Code)
	}
}
