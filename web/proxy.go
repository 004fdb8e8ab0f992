package web

import (
	"net"
	"net/http"
	"net/netip"
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
