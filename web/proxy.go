package web

import (
	"crypto/rand"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"
)

// proxyTrust knows which TCP peers are our own reverse proxies. Only their
// forwarding headers (X-Forwarded-For, X-Forwarded-Proto, the SSO header)
// are believed: anyone can send those headers, only a proxy's address
// cannot be forged over TCP.
type proxyTrust struct {
	nets []netip.Prefix
}

// peer is the TCP peer's address, whatever the headers say.
func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// trusted reports whether the request came straight from a trusted proxy.
func (t proxyTrust) trusted(r *http.Request) bool {
	if len(t.nets) == 0 {
		return false
	}
	addr, ok := peer(r)
	if !ok {
		return false
	}
	for _, p := range t.nets {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// https reports whether the browser's connection is encrypted: TLS here,
// or a trusted proxy that terminated TLS and says so.
func (t proxyTrust) https(r *http.Request) bool {
	return r.TLS != nil || (t.trusted(r) && strings.EqualFold(r.Header.Get(echo.HeaderXForwardedProto), "https"))
}

// ipExtractor makes c.RealIP() believe X-Forwarded-For only from trusted
// proxies. echo's defaults would trust every private and loopback
// address, which on most networks means anyone; with no trusted proxy the
// TCP peer is the client.
func (t proxyTrust) ipExtractor() echo.IPExtractor {
	if len(t.nets) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range t.nets {
		opts = append(opts, echo.TrustIPRange(prefixNet(p)))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// hsts tells browsers to use only HTTPS from now on, but only on a
// response that itself came over HTTPS: on plain HTTP the header is
// meaningless, and believing any client's X-Forwarded-Proto (as echo's
// Secure middleware does) would let it be set where it should not be.
func hsts(t proxyTrust) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if t.https(c.Request()) {
				c.Response().Header().Set(echo.HeaderStrictTransportSecurity, "max-age=31536000; includeSubDomains")
			}
			return next(c)
		}
	}
}

// requestIDPattern is what a request id from a proxy may look like: the
// usual UUIDs and trace ids, nothing that could pass for other text in a
// log line or the audit trail.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:@+=/-]{1,128}$`)

// requestID gives every request an id, for the logs, error pages and the
// audit trail, and answers with it in X-Request-Id. A client's own
// X-Request-Id is believed only from a trusted proxy (which then keeps one
// id across its logs and ours) and only if it looks like an id; anyone
// else's is replaced: the audit trail must not record what a client made
// up.
func requestID(t proxyTrust) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			id := r.Header.Get(echo.HeaderXRequestID)
			if !t.trusted(r) || !requestIDPattern.MatchString(id) {
				id = rand.Text()
			}
			// Both: the request logger reads the request's header first.
			r.Header.Set(echo.HeaderXRequestID, id)
			c.Response().Header().Set(echo.HeaderXRequestID, id)
			return next(c)
		}
	}
}
