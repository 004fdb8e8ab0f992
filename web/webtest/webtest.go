// Package webtest signs tests in to the real console: users with a role,
// sessions with their CSRF token, API tokens. Handler tests use it with
// httptest against web.NewServer; browser and end-to-end tests use Client
// against a listening server.
package webtest

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/access"
)

// Password is every test user's password.
const Password = "correct horse battery staple"

// SessionCookie is the session cookie's name over plain HTTP (over HTTPS
// it is "__Host-" and this).
const SessionCookie = "redrive_session"

// tokenPattern finds the CSRF token in a page's <meta name="csrf-token">:
// the token is tied to the session, so it is read from a page of that
// session, as a browser's forms and htmx get it.
var tokenPattern = regexp.MustCompile(`<meta name="csrf-token" content="([^"]*)"`)

// PageToken returns the CSRF token of an HTML page, or "".
func PageToken(page string) string {
	if m := tokenPattern.FindStringSubmatch(page); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

// CreateUser adds an active user with role and Password. The hash is made
// at bcrypt's minimum cost: tests sign in often, and the cost is stored in
// the hash, so checking it is quick too.
func CreateUser(t testing.TB, store *access.Store, name string, role dlq.Role) dlq.User {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	u, err := store.CreateUser(context.Background(), dlq.NewUser{Name: name, Role: role, PasswordHash: hash,
		Actor: dlq.Actor{Name: "webtest"}, Now: time.Now()})
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return u
}

// Token creates an API token for the user called name and returns it.
func Token(t testing.TB, store *access.Store, name string) string {
	t.Helper()
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateToken(context.Background(), dlq.NewToken{UserName: name, Label: "test-" + secret[len(secret)-8:],
		Hash: dlq.HashToken(secret), Actor: dlq.Actor{Name: "webtest"}, Now: time.Now()}); err != nil {
		t.Fatalf("create token for %s: %v", name, err)
	}
	return secret
}

// Session is a signed-in browser, in process: its cookies and the CSRF
// token its forms would carry.
type Session struct {
	Cookies map[string]*http.Cookie
	CSRF    string
}

// Visit returns a signed-out browser that has opened the sign-in page:
// its cookies and the token of that page's form.
func Visit(t testing.TB, h http.Handler) *Session {
	t.Helper()
	s := &Session{Cookies: map[string]*http.Cookie{}}
	s.Load(t, h, "/login")
	return s
}

// Load GETs path, which must be a page, and takes its CSRF token.
func (s *Session) Load(t testing.TB, h http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := s.Do(h, httptest.NewRequest(http.MethodGet, path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, rec.Code)
	}
	if s.CSRF = PageToken(rec.Body.String()); s.CSRF == "" {
		t.Fatalf("GET %s: no CSRF token on the page", path)
	}
	return rec
}

// SignIn signs in through h as a browser would: the sign-in page for its
// form's token, the form, then one page for the token of the new session.
// It fails the test unless the sign-in succeeds.
func SignIn(t testing.TB, h http.Handler, name, password string) *Session {
	t.Helper()
	s := Visit(t, h)
	form := url.Values{"username": {name}, "password": {password}, "_csrf": {s.CSRF}}
	req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := s.Do(h, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d %.300s", name, rec.Code, rec.Body.String())
	}
	// Any page every role may read will do; this one is cheap.
	s.Load(t, h, "/workers")
	if s.Cookies[SessionCookie] == nil {
		t.Fatalf("sign in as %s: no session cookie", name)
	}
	return s
}

// Do sends req through h with the session's cookies (and, on a request
// that may change something, its CSRF token as X-CSRF-Token unless the
// request has one), and keeps the cookies the answer sets or clears.
func (s *Session) Do(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	for _, c := range s.Cookies {
		req.AddCookie(c)
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead:
	default:
		if req.Header.Get("X-CSRF-Token") == "" && s.CSRF != "" {
			req.Header.Set("X-CSRF-Token", s.CSRF)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(s.Cookies, c.Name)
		} else {
			s.Cookies[c.Name] = c
		}
	}
	return rec
}

// Handler is h as seen by this session: every request carries its cookies
// and CSRF token. Tests that were written before sign-in existed wrap
// their server in it and go on sending plain requests.
func (s *Session) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range s.Cookies {
			r.AddCookie(c)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("X-CSRF-Token") == "" {
			r.Header.Set("X-CSRF-Token", s.CSRF)
		}
		h.ServeHTTP(w, r)
	})
}

// AsRole creates a user named after role (viewer, operator, admin) and
// returns h as that user's signed-in session.
func AsRole(t testing.TB, h http.Handler, store *access.Store, role dlq.Role) http.Handler {
	t.Helper()
	CreateUser(t, store, string(role), role)
	return SignIn(t, h, string(role), Password).Handler(h)
}

// Client signs in to the console at baseURL and returns an HTTP client
// that keeps the session (a cookie jar) and the CSRF token to send with
// forms (_csrf) or as X-CSRF-Token.
func Client(t testing.TB, baseURL, name, password string) (*http.Client, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	token := func(path string) string {
		resp, err := client.Get(baseURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return PageToken(string(body))
	}
	resp, err := client.PostForm(baseURL+"/login", url.Values{"username": {name}, "password": {password}, "_csrf": {token("/login")}})
	if err != nil {
		t.Fatalf("sign in: %v", err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path == "/login" {
		t.Fatalf("sign in as %s failed: %d", name, resp.StatusCode)
	}
	return client, token("/workers")
}
