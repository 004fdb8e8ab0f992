package remote

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestPlainHTTPConsole: an http:// console address sends the token in
// clear: a warning unless the host is this machine, a refusal with
// --require-tls or REDRIVE_REQUIRE_TLS=1.
func TestPlainHTTPConsole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, requireEnv string
		requireFlag     bool
		warn, refuse    bool
	}{
		{url: "https://redrive.example.com"},
		{url: "http://127.0.0.1:8080"},
		{url: "http://[::1]:8080"},
		{url: "http://localhost:8080", requireFlag: true},
		{url: "http://redrive.example.com", warn: true},
		{url: "http://10.0.0.7:8080", warn: true},
		{url: "http://redrive.example.com", requireFlag: true, refuse: true},
		{url: "http://redrive.example.com", requireEnv: "1", refuse: true},
		{url: "https://redrive.example.com", requireEnv: "true"},
	} {
		var out, errOut bytes.Buffer
		vars := map[string]string{EnvURL: tc.url, EnvToken: "rdv_x", EnvRequireTLS: tc.requireEnv}
		e := newEnv(func(k string) string { return vars[k] }, &out, &errOut, false)
		*e.requireTLS = tc.requireFlag
		_, err := e.client()
		var ue *UsageError
		if refused := errors.As(err, &ue); refused != tc.refuse || err != nil && !refused {
			t.Errorf("%+v: error %v; want refused %v", tc, err, tc.refuse)
		}
		if warned := strings.Contains(errOut.String(), "in clear"); warned != tc.warn {
			t.Errorf("%+v: stderr %q; want a warning %v", tc, errOut.String(), tc.warn)
		}
	}

	// The flag is every command's, and refuses before anything is sent.
	var out bytes.Buffer
	vars := map[string]string{EnvURL: "http://redrive.invalid", EnvToken: "rdv_x"}
	err := Run(context.Background(), []string{"letters", "list", "--require-tls"}, func(k string) string { return vars[k] }, &out, &out)
	if ue := (*UsageError)(nil); !errors.As(err, &ue) || !strings.Contains(err.Error(), "require-tls") {
		t.Fatalf("letters list --require-tls over http: %v; want a usage error naming it", err)
	}
}
