package web_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps the dependency arrows of STYLE.md honest: views touch
// no database, handlers hold no SQL, the store knows nothing of HTTP.
func TestLayering(t *testing.T) {
	t.Parallel()
	const mod = "github.com/redrive/redrive/"
	// Transitive rules say a package must not reach another at all (views
	// never reach the database). Direct rules say a package must not import
	// another itself: handlers import dlq for its types and errors, and dlq
	// in turn imports sqlx, but a handler must never write SQL.
	rules := []struct {
		pkg       string
		direct    bool
		forbidden []string
	}{
		{"views", false, []string{mod + "dlq", mod + "replay", mod + "worker", "github.com/jmoiron/sqlx", "database/sql", "github.com/lib/pq", "github.com/labstack/echo/v4"}},
		{"handlers", true, []string{"github.com/jmoiron/sqlx", "database/sql", "github.com/lib/pq", mod + "web"}},
		{"dlq", false, []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web", mod + "replay", mod + "worker"}},
		{"replay", false, []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web"}},
		{"worker", false, []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web", mod + "replay"}},
	}
	for _, r := range rules {
		args := []string{"list", "-deps", "-f", "{{.ImportPath}}", mod + r.pkg}
		if r.direct {
			args = []string{"list", "-f", `{{join .Imports "\n"}}`, mod + r.pkg + "/..."}
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			if strings.Contains(string(out), "no Go files") {
				continue // a package not written yet has no arrows to check
			}
			t.Fatalf("go list %s: %v\n%s", r.pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		for _, f := range r.forbidden {
			if deps[f] {
				t.Errorf("%s must not depend on %s", r.pkg, f)
			}
		}
	}
}
