package web_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// TestRequestIDFromTrustedProxiesOnly: the audit trail's request id is
// the client's X-Request-Id only when a trusted proxy sent it and it looks
// like an id; otherwise the server makes one.
func TestRequestIDFromTrustedProxiesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *web.Config) {
		c.Auth.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	n := 0
	failWith := func(remote, id string) (header, audited string) {
		n++ // a name each, so that no attempt is throttled (and so not audited)
		s := webtest.Visit(t, e.h)
		req := request("POST", "/login", form("username", fmt.Sprintf("nobody%d", n), "password", "a wrong password", "_csrf", s.CSRF))
		req.RemoteAddr = remote
		req.Header.Set("X-Request-Id", id)
		rec := s.Do(e.h, req)
		if err := e.db.Get(&audited, `SELECT request_id FROM audit_events WHERE action = 'sign_in_failed' ORDER BY id DESC LIMIT 1`); err != nil {
			t.Fatal(err)
		}
		return rec.Header().Get("X-Request-Id"), audited
	}
	for _, tc := range []struct{ name, remote, id string }{
		{"UntrustedClient", "198.51.100.1:1", "forged-request-id"},
		{"TrustedProxyButNotAnID", "10.0.0.2:1", "<script>alert(1)</script>"},
		{"TrustedProxyButTooLong", "10.0.0.2:1", strings.Repeat("x", 500)},
	} {
		header, audited := failWith(tc.remote, tc.id)
		if audited == tc.id || header == tc.id || audited == "" || audited != header {
			t.Errorf("%s: audited %.40q, answered %.40q for a client id of %.40q; want a fresh id, the same in both", tc.name, audited, header, tc.id)
		}
	}
	if header, audited := failWith("10.0.0.2:1", "proxy-7f3a-0001"); audited != "proxy-7f3a-0001" || header != audited {
		t.Errorf("a trusted proxy's id: audited %q, answered %q, want proxy-7f3a-0001", audited, header)
	}
}
