package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/labstack/echo/v4"
)

// ProxyTrust knows which TCP peers are our own reverse proxies. Only their
// forwarding headers (X-Forwarded-For, X-Forwarded-Proto, the SSO header)
// are believed: anyone can send those headers, only a proxy's address
// cannot be forged over TCP.
type ProxyTrust struct {
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
func (t ProxyTrust) Trusted(r *http.Request) bool {
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
func (t ProxyTrust) HTTPS(r *http.Request) bool {
	return r.TLS != nil || (t.Trusted(r) && strings.EqualFold(r.Header.Get(echo.HeaderXForwardedProto), "https"))
}

// IPExtractor makes c.RealIP() believe X-Forwarded-For only from trusted
// proxies. echo's defaults would trust every private and loopback
// address, which on most networks means anyone; with no trusted proxy the
// TCP peer is the client.
func (t ProxyTrust) IPExtractor() echo.IPExtractor {
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
