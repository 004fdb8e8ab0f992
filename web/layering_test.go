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
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		{"views", []string{mod + "dlq", mod + "replay", mod + "worker", "github.com/jmoiron/sqlx", "database/sql", "github.com/lib/pq", "github.com/labstack/echo/v4"}},
		{"handlers", []string{"github.com/jmoiron/sqlx", "database/sql", "github.com/lib/pq", mod + "web"}},
		{"dlq", []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web", mod + "replay", mod + "worker"}},
		{"replay", []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web"}},
		{"worker", []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", mod + "views", mod + "handlers", mod + "web", mod + "replay"}},
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", mod+r.pkg).CombinedOutput()
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
