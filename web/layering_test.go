package web_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/redrive/redrive"

// parts maps every package of the module to the part of the design it
// belongs to. A new package fails TestLayering until it is given a part
// here, so that its arrows are decided rather than discovered.
var parts = map[string]string{
	mod:                                  "cmd",
	mod + "/internal/cli":                "cmd",
	mod + "/dlq":                         "store",
	mod + "/mask":                        "mask",
	mod + "/grouping":                    "grouping",
	mod + "/grouping/internal/corpusgen": "tool",
	mod + "/replay":                      "replay",
	mod + "/worker":                      "worker",
	mod + "/worker/demo":                 "demo",
	mod + "/seed":                        "seed",
	mod + "/handlers":                    "handlers",
	mod + "/views":                       "views",
	mod + "/web":                         "web",
	mod + "/web/auth":                    "auth",
	mod + "/principal":                   "principal",
	mod + "/migrations":                  "migrations",
	mod + "/static":                      "static",
	mod + "/internal/localpg":            "localpg",
	mod + "/internal/remote":             "remote",
	mod + "/notify":                      "notify",
	mod + "/dlq/dlqtest":                 "testkit",
	mod + "/web/webtest":                 "testkit",
	mod + "/e2e":                         "suite",
	mod + "/reliability":                 "suite",
}

// arrows are the imports a part's code may make, besides its own part.
// They point one way: handlers -> replay/store -> database. docs/
// architecture.md ("The parts") lists the same arrows.
var arrows = map[string][]string{
	// The binary (main and internal/cli) wires everything: the store, the
	// replay service, the worker with the demo tasks, the console, the
	// notification sender, a private Postgres, the remote CLI, and the
	// seed (`redrive seed`).
	"cmd": {"store", "replay", "worker", "demo", "seed", "web", "auth", "localpg", "notify", "remote", "mask"},
	// The store migrates its own schema, and keeps the mask policy the
	// search text is built with.
	"store":  {"migrations", "mask", "grouping"},
	"replay": {"store"},
	// The worker cuts long error text with the mark masking recognises.
	"worker": {"store", "mask"},
	"demo":   {"worker", "store"},
	// The seed generates letters of the demo's shop tasks and has the
	// store write them.
	"seed":     {"store", "demo", "grouping"},
	"handlers": {"store", "replay", "views", "mask", "principal"},
	"views":    {"mask"}, // the placeholder a hidden value reads as
	// The console: its handlers and views, auth for the middleware that
	// decides who is asking and what they may do, the store for the reads
	// it hands the handlers, replay for the service, and its static files.
	// The error handler reads the errors of store and replay.
	"web": {"handlers", "views", "auth", "store", "replay", "static", "mask"},
	// Sessions, sign-in, tokens, SSO, CSRF and access rules: users and
	// tokens come from the store; the principal it sets is principal's.
	"auth": {"store", "principal", "mask"},
	// Who is asking: set by auth, read by handlers; the role is the store's.
	"principal": {"store"},
	// The masking policy: pure functions of the policy and the text or
	// JSON in hand, shared by the store, the pages and the notifications.
	"mask": {},
	// Grouping learns error templates from letters; it imports nothing of
	// Redrive's, and the store keeps what it learns.
	"grouping": {},
	// The generator of grouping's labelled corpus, run by hand.
	"tool":       {},
	"migrations": {},
	"static":     {},
	"localpg":    {},
	// Notifications read the store's outbox and post webhooks.
	"notify": {"store", "mask"},
	// The remote CLI speaks HTTP to a console and nothing else: it has its
	// own types for the API's answers.
	"remote":  {},
	"testkit": {"store", "localpg"},
	"suite":   {"cmd", "store", "replay", "worker", "demo", "web", "auth", "localpg", "testkit"},
}

// testArrows are the imports a part's tests may make besides its arrows:
// every test may use the test kit; handler tests drive the real server.
var testArrows = map[string][]string{
	"cmd":    {"testkit"},
	"store":  {"testkit"},
	"replay": {"testkit"},
	// The worker's process tests run their child workers as the binary does.
	"worker": {"testkit", "localpg", "cmd"},
	// The demo's tests replay the incident's group and seeded letters as an
	// operator would.
	"demo": {"testkit", "replay", "seed"},
	"seed": {"testkit", "grouping"},
	// A masked message must group with its unmasked original.
	"grouping": {"mask"},
	// The bulk replay benchmark seeds its million letters.
	"handlers": {"testkit", "web", "seed"},
	"views":    {},
	"web":      {"testkit"},
	"auth":     {"testkit"},
	"localpg":  {},
	"testkit":  {},
	"suite":    {},
	"notify":   {"testkit"},
	// The remote CLI is tested against a real console and worker.
	"remote": {"testkit", "store", "replay", "web", "worker"},
}

// Packages outside the module that some parts must never reach.
var (
	sqlPkgs  = []string{"database/sql", "github.com/jmoiron/sqlx", "github.com/lib/pq"}
	httpPkgs = []string{"github.com/labstack/echo/v4", "github.com/a-h/templ", "github.com/gorilla/sessions"}
)

// forbidden lists, per part, outside packages it must not reach at all
// (deps, transitively) or must not import itself (imports): a handler
// reaches sqlx through the store, but must never write SQL.
var forbidden = map[string]struct{ deps, imports []string }{
	"views":    {deps: append(slices.Clone(sqlPkgs), "github.com/labstack/echo/v4")},
	"handlers": {imports: sqlPkgs},
	"auth":     {imports: sqlPkgs},
	"store":    {deps: httpPkgs},
	"replay":   {deps: httpPkgs},
	"worker":   {deps: httpPkgs},
	"demo":     {deps: httpPkgs},
	"seed":     {deps: httpPkgs, imports: sqlPkgs},
	"localpg":  {deps: httpPkgs},
	"notify":   {deps: httpPkgs},
	"remote":   {deps: sqlPkgs},
	"mask":     {deps: slices.Concat(sqlPkgs, httpPkgs)},
}

type listedPackage struct {
	ImportPath                               string
	Imports, Deps, TestImports, XTestImports []string
}

// TestLayering checks every import edge of every package against the
// parts and arrows above, and fails on any edge not drawn there.
func TestLayering(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,TestImports,XTestImports", mod+"/...").Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		seen++
		part, ok := parts[p.ImportPath]
		if !ok {
			t.Errorf("%s has no part: add it to parts in web/layering_test.go and decide its arrows", p.ImportPath)
			continue
		}
		checkEdges(t, p.ImportPath, part, p.Imports, arrows[part])
		tests := slices.Concat(arrows[part], testArrows[part])
		checkEdges(t, p.ImportPath+" (tests)", part, slices.Concat(p.TestImports, p.XTestImports), tests)
		for _, f := range forbidden[part].deps {
			if slices.Contains(p.Deps, f) {
				t.Errorf("%s (%s) must not depend on %s", p.ImportPath, part, f)
			}
		}
		for _, f := range forbidden[part].imports {
			if slices.Contains(p.Imports, f) {
				t.Errorf("%s (%s) must not import %s", p.ImportPath, part, f)
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list found no packages")
	}
}

// checkEdges fails on each import of the module that goes from part to a
// part not in allowed.
func checkEdges(t *testing.T, from, part string, imports, allowed []string) {
	t.Helper()
	for _, imp := range imports {
		if imp != mod && !strings.HasPrefix(imp, mod+"/") {
			continue
		}
		to, ok := parts[imp]
		if !ok {
			t.Errorf("%s imports %s, which has no part", from, imp)
			continue
		}
		if to != part && !slices.Contains(allowed, to) {
			t.Errorf("%s (%s) must not import %s (%s): not an arrow in web/layering_test.go", from, part, imp, to)
		}
	}
}
