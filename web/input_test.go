package web_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// Text Postgres cannot store (a NUL byte, bytes that are not UTF-8) is a
// clear 400 that changes nothing, wherever it comes in: never a 500, never
// half a change.
func TestUnstorableTextIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{})
	s := e.as(t, "op", dlq.RoleOperator)
	admin := e.as(t, "root", dlq.RoleAdmin)
	attempts := e.count(t, `SELECT count(*) FROM login_attempts`)

	for _, tc := range []struct {
		name string
		do   func() int
	}{
		{"SignInName", func() int {
			return e.do("POST", "/login", form("username", "a\x00b", "password", "whatever-long")).Code
		}},
		{"SignInNameNotUTF8", func() int {
			return e.do("POST", "/login", form("username", "\xff", "password", "whatever-long")).Code
		}},
		{"DiscardReasonInAForm", func() int {
			return s.Do(e.h, request("POST", fmt.Sprintf("/dead-letters/%d/discard", id), form("reason", "pro\x00be"))).Code
		}},
		{"IdempotencyKeyHeader", func() int {
			req := request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), `{}`)
			req.Header.Set("Idempotency-Key", "k\xff")
			return s.Do(e.h, req).Code
		}},
		{"NULEscapedInJSON", func() int {
			return s.Do(e.h, request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason":"a\u0000b"}`)).Code
		}},
		{"NULInEditedArgs", func() int {
			return s.Do(e.h, request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), `{"args":["a\u0000b"]}`)).Code
		}},
		{"AdminPath", func() int {
			return admin.Do(e.h, request("POST", "/admin/users/%00/disable", form("x", "1"))).Code
		}},
	} {
		before := e.state(t)
		if code := tc.do(); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", tc.name, code)
		}
		if after := e.state(t); after != before {
			t.Errorf("%s: the database changed: %s -> %s", tc.name, before, after)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM login_attempts`); n != attempts {
		t.Errorf("refused sign-ins left %d attempt rows", n-attempts)
	}
	// Reads too: a query string that does not parse is refused rather than
	// silently dropped (which listed everything unfiltered).
	for _, path := range []string{"/api/v1/dead-letters?q=%", "/dead-letters?q=50%", "/audit?actor=%zz"} {
		if rec := s.Do(e.h, request("GET", path, "")); rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, rec.Code)
		}
	}
	if rec := s.Do(e.h, request("GET", "/dead-letters?q=50%25", "")); rec.Code != http.StatusOK {
		t.Errorf("an escaped %% is fine: %d", rec.Code)
	}
	rec := e.do("POST", "/login", form("username", "a\x00b", "password", "whatever-long"))
	if !strings.Contains(rec.Body.String(), "NUL byte") {
		t.Errorf("the refusal does not say why: %s", rec.Body.String())
	}
}

// HEAD is answered like GET, without a body: uptime checks use it.
func TestHeadIsAnsweredLikeGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/healthz", "/readyz", "/dead-letters", "/static/nope.css"} {
		get, err := client.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		head, err := client.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || head.StatusCode == http.StatusMethodNotAllowed || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes, GET: %d", path, head.StatusCode, len(body), get.StatusCode)
		}
	}
}

// A HEAD response carries no body on the wire either: Go's client never
// reads one, so this speaks HTTP over a raw connection. A body there would
// be read as the start of the next response on a kept-alive connection.
func TestHeadSendsNoBodyOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	// Two requests on one connection: HEAD, then GET; the second response
	// must start right where the first one's header ends.
	if _, err := io.WriteString(conn, "HEAD /healthz HTTP/1.1\r\nHost: test\r\n\r\n"+
		"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, ok := strings.Cut(string(raw), "\r\n\r\n")
	if !ok || !strings.HasPrefix(first, "HTTP/1.1 200") {
		t.Fatalf("HEAD /healthz: %q", raw)
	}
	if !strings.HasPrefix(rest, "HTTP/1.1 200") {
		t.Errorf("HEAD /healthz sent a body: after its header came %q, not the GET's response", rest)
	}
	if _, body, _ := strings.Cut(rest, "\r\n\r\n"); body != "ok" {
		t.Errorf("GET /healthz after a HEAD: body %q, want ok", body)
	}
}
