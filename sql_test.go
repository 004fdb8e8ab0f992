package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqlStatement is a string that starts as a statement does (Redrive's
// SQL is written in capitals).
var sqlStatement = regexp.MustCompile(`(?s)^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP|TRUNCATE|GRANT|LOCK|LISTEN|NOTIFY)\s`)

// sqlOutsideTheStore are the folders other than store/ whose code may hold
// SQL, and why.
var sqlOutsideTheStore = map[string]string{
	"worker/demo":      "the demo's tasks keep their own tables, as a team's tasks would",
	"internal/localpg": "it creates the private cluster's role and database",
}

// TestSQLLivesInTheStore fails on a statement written in Go outside the
// store's rooms (store/...) and the few folders above: a query belongs to
// the room that owns its tables, so that a schema change finds all of them.
// Tests are free to read the database as they please.
func TestSQLLivesInTheStore(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "store" || sqlOutsideTheStore[path] != "") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir // another module (benchmarks)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_templ.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && sqlStatement.MatchString(s) {
				t.Errorf("%s: SQL outside the store (%.40q): move it to the room that owns its tables", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
