package handlers_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// benchViewer signs a benchmark in as a viewer. Benchmark databases are
// reused across runs and benchmarks, so the viewer may already exist.
func benchViewer(b *testing.B, h http.Handler, store *storetest.Stores) http.Handler {
	b.Helper()
	if _, err := store.Access.UserByName(context.Background(), "bench-viewer"); errors.Is(err, dlq.ErrNotFound) {
		webtest.CreateUser(b, store.Access, "bench-viewer", dlq.RoleViewer)
	}
	return webtest.SignIn(b, h, "bench-viewer", webtest.Password).Handler(h)
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":                              "/",
		"/":                             "/",
		"/dead-letters?task=a&status=x": "/dead-letters?task=a&status=x",
		"/jobs/12#attempts":             "/jobs/12#attempts",
		"https://evil.example":          "/",
		"http://evil.example/x":         "/",
		"//evil.example":                "/",
		"//evil.example/path":           "/",
		"/\\evil.example":               "/",
		"\\\\evil.example":              "/",
		"/x\\y":                         "/",
		"javascript:alert(1)":           "/",
		"JAVASCRIPT:alert(1)":           "/",
		"evil.example":                  "/",
		"/\t/evil.example":              "/",
		"/\n/evil.example":              "/",
		"/%2F%2Fevil.example":           "/%2F%2Fevil.example", // a path on this site, percent-encoded
		" /dead-letters":                "/",
		"data:text/html,hi":             "/",
	}
	for in, want := range cases {
		if got := handlers.SafeNext(in); got != want {
			t.Errorf("SafeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "https://x", "/a?b=c", "/%2f%2fx", "/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := handlers.SafeNext(next)
		if got == "/" {
			return
		}
		// Whatever passes is a path here: one leading slash, then not a
		// second slash or a backslash, and no backslash or control byte.
		if got[0] != '/' || (len(got) > 1 && (got[1] == '/' || got[1] == '\\')) {
			t.Fatalf("SafeNext(%q) = %q leaves the site", next, got)
		}
		for _, r := range got {
			if r < 0x20 || r == '\\' || r == 0x7f {
				t.Fatalf("SafeNext(%q) = %q has %q", next, got, r)
			}
		}
	})
}
