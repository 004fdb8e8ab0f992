package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// architectureDoc holds, between its markers, the list of parts: the one
// description of the architecture, which TestLayering holds the code to.
const (
	architectureDoc = "docs/architecture.md"
	partsBegin      = "<!-- begin parts: read by TestLayering (layering_test.go) -->"
	partsEnd        = "<!-- end parts -->"
	mod             = "github.com/redrive/redrive"
)

// part is one part of the design: its packages, the parts its code and its
// tests may import, and the outside packages it must keep away from.
type part struct {
	name  string
	pkgs  []string        // import paths
	uses  map[string]bool // parts its code may import ("→")
	tests map[string]bool // parts only its tests may import ("tests →")
	// reaches are outside packages it must not depend on at all, even
	// through another package; imports are those it must not import itself
	// (a handler reaches sqlx through the store, but writes no SQL).
	reaches, imports []string
}

// architecture is the list of parts as the document states it, from the
// top floor down.
type architecture struct {
	parts  []*part
	byPkg  map[string]*part    // import path → its part
	groups map[string][]string // "SQL" → the outside packages it names
}

// rule is an item under a part ("→ a, b: why", "never reaches SQL: why"),
// kept until every part and group is known, so the list reads top down.
type rule struct {
	p          *part
	kind, what string
	line       int
}

// The items of the list. An item that is none of these is an error, so
// that a mistyped arrow fails rather than drawing nothing.
var (
	// \x60 is a backquote, which a raw string cannot hold.
	partLine  = regexp.MustCompile(`^- \*\*([a-z]+)\*\* ((?:\x60[^\x60]+\x60 )+)— \S`)
	groupLine = regexp.MustCompile(`^- \*\*([A-Z]+)\*\* is ((?:\x60[^\x60]+\x60(?:, | and )?)+)\.$`)
	ruleLine  = regexp.MustCompile(`^  - (→|tests →|never reaches|never imports) ([^:]+): \S`)
	quoted    = regexp.MustCompile(`\x60([^\x60]+)\x60`)
)

// readArchitecture reads the list of parts in r. Between the markers, a
// line that is no list item is prose.
func readArchitecture(r io.Reader) (*architecture, error) {
	a := &architecture{byPkg: map[string]*part{}, groups: map[string][]string{}}
	var rules []rule
	var cur *part
	in, done := false, false
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == partsBegin:
			in = true
		case line == partsEnd:
			in, done = false, true
		case !in || !strings.HasPrefix(strings.TrimLeft(line, " "), "-"):
		case partLine.MatchString(line):
			var err error
			if cur, err = a.addPart(partLine.FindStringSubmatch(line)); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		case groupLine.MatchString(line):
			m := groupLine.FindStringSubmatch(line)
			for _, q := range quoted.FindAllStringSubmatch(m[2], -1) {
				a.groups[m[1]] = append(a.groups[m[1]], q[1])
			}
			cur = nil
		case ruleLine.MatchString(line) && cur != nil:
			m := ruleLine.FindStringSubmatch(line)
			rules = append(rules, rule{cur, m[1], m[2], n})
		default:
			return nil, fmt.Errorf("line %d is not a part, a group, an arrow with its reason, or a rule: %q", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !done || len(a.parts) == 0 {
		return nil, errors.New("no list of parts between " + partsBegin + " and " + partsEnd)
	}
	for _, r := range rules {
		if err := a.apply(r); err != nil {
			return nil, fmt.Errorf("line %d: %w", r.line, err)
		}
	}
	return a, nil
}

// addPart adds the part of a partLine match: its name and its folders
// (`.` is the module's root).
func (a *architecture) addPart(m []string) (*part, error) {
	p := &part{name: m[1], uses: map[string]bool{}, tests: map[string]bool{}}
	if a.part(p.name) != nil {
		return nil, fmt.Errorf("part %s is listed twice", p.name)
	}
	for _, q := range quoted.FindAllStringSubmatch(m[2], -1) {
		pkg := mod
		if dir := strings.TrimSuffix(q[1], "/"); dir != "." {
			pkg += "/" + dir
		}
		if other, ok := a.byPkg[pkg]; ok {
			return nil, fmt.Errorf("%s is in part %s already", q[1], other.name)
		}
		a.byPkg[pkg] = p
		p.pkgs = append(p.pkgs, pkg)
	}
	a.parts = append(a.parts, p)
	return p, nil
}

// apply adds a rule to its part. The list runs from the top floor down,
// so the code's arrows point down it; a test may import a part above its
// own (a handler test drives the whole server).
func (a *architecture) apply(r rule) error {
	for _, w := range strings.Split(r.what, ", ") {
		switch r.kind {
		case "→", "tests →":
			if a.part(w) == nil {
				return fmt.Errorf("%s is not a part", w)
			}
			if r.kind == "tests →" {
				r.p.tests[w] = true
				continue
			}
			if a.index(w) <= a.index(r.p.name) {
				return fmt.Errorf("%s → %s runs back up: %s is listed above %s", r.p.name, w, w, r.p.name)
			}
			r.p.uses[w] = true
		default:
			pkgs, ok := a.groups[w]
			if q := quoted.FindStringSubmatch(w); q != nil {
				pkgs, ok = []string{q[1]}, true
			}
			if !ok {
				return fmt.Errorf("%s is neither a group nor a `package`", w)
			}
			if r.kind == "never reaches" {
				r.p.reaches = append(r.p.reaches, pkgs...)
			} else {
				r.p.imports = append(r.p.imports, pkgs...)
			}
		}
	}
	return nil
}

// part returns the part named name, or nil.
func (a *architecture) part(name string) *part {
	if i := a.index(name); i >= 0 {
		return a.parts[i]
	}
	return nil
}

// index returns where the part named name stands in the list, or -1.
func (a *architecture) index(name string) int {
	return slices.IndexFunc(a.parts, func(p *part) bool { return p.name == name })
}

// TestReadArchitecture checks that the reader reads each kind of item,
// and refuses what it cannot read rather than drawing less than was
// written.
func TestReadArchitecture(t *testing.T) {
	t.Parallel()
	list := func(lines ...string) io.Reader {
		return strings.NewReader(strings.Join(slices.Concat([]string{"# Parts", partsBegin}, lines, []string{partsEnd}), "\n"))
	}
	a, err := readArchitecture(list(
		"- **web** `web/` — the server.",
		"  - → store: it reads the store.",
		"  - never reaches SQL, `github.com/a-h/templ`: why.",
		"",
		"- **store** `dlq/` `.` — the store.",
		"  - tests → web: a test drives the server.",
		"Some words between the lists.",
		"- **SQL** is `database/sql` and `github.com/lib/pq`.",
	))
	if err != nil {
		t.Fatal(err)
	}
	web, store := a.part("web"), a.part("store")
	if web == nil || store == nil || !web.uses["store"] || !store.tests["web"] || a.byPkg[mod] != store || a.byPkg[mod+"/dlq"] != store {
		t.Fatalf("parts read wrongly: web %+v, store %+v", web, store)
	}
	if want := []string{"database/sql", "github.com/lib/pq", "github.com/a-h/templ"}; !slices.Equal(web.reaches, want) {
		t.Errorf("web never reaches %q, want %q", web.reaches, want)
	}
	for name, r := range map[string]io.Reader{
		"an arrow without its reason": list("- **web** `web/` — the server.", "  - → web"),
		"an arrow to no part":         list("- **web** `web/` — the server.", "  - → store: why."),
		"an arrow that runs back up":  list("- **web** `web/` — a.", "- **store** `dlq/` — b.", "  - → web: why."),
		"a package in two parts":      list("- **web** `web/` — a.", "- **other** `web/` — b."),
		"a part listed twice":         list("- **web** `web/` — a.", "- **web** `views/` — b."),
		"an unknown group":            list("- **web** `web/` — a.", "  - never imports SQL: why."),
		"an item of no kind":          list("- **web** `web/` — a.", "  - imports store: why."),
		"a part without its words":    list("- **web** `web/`"),
		"no markers":                  strings.NewReader("- **web** `web/` — a.\n"),
	} {
		if _, err := readArchitecture(r); err == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}
