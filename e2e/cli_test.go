package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/redrive/redrive/dlq/dlqtest"
)

// The binary is built once for the CLI tests.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func redriveBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "redrive-cli-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "redrive")
		out, err := exec.Command("go", "build", "-o", binPath, "..").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build redrive: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// cli runs the binary against db and returns its combined output and exit code.
func cli(t *testing.T, db *dlqtest.DB, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(redriveBinary(t), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.DSN)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return string(out), code
}

func TestCLI(t *testing.T) {
	t.Parallel()
	db := dlqtest.NewDB(t)

	out, code := cli(t, db, "migrate")
	if code != 0 || !strings.Contains(out, "schema at version") {
		t.Fatalf("migrate: %d %s", code, out)
	}
	if _, err := db.Exec(`INSERT INTO tasks (name) VALUES ('demo.noop')`); err != nil {
		t.Fatal(err)
	}

	bad := map[string][]string{
		"unknown task":          {"enqueue", "--task", "no.such.task"},
		"malformed args":        {"enqueue", "--task", "demo.noop", "--args", "[1,"},
		"negative max attempts": {"enqueue", "--task", "demo.noop", "--max-attempts", "-1"},
		"no task":               {"enqueue"},
		"bad retention age":     {"purge", "--older-than", "soon"},
	}
	for name, args := range bad {
		out, code := cli(t, db, args...)
		if code == 0 || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
			t.Errorf("%s: want a clear error, got exit %d:\n%s", name, code, out)
		}
	}
	var jobs int
	if err := db.Get(&jobs, `SELECT count(*) FROM jobs`); err != nil || jobs != 0 {
		t.Fatalf("bad input left %d jobs (%v)", jobs, err)
	}

	for range 2 {
		out, code = cli(t, db, "enqueue", "--task", "demo.noop", "--key", "order-1", "--kwargs", `{"a":1}`)
		if code != 0 || !strings.Contains(out, `"task": "demo.noop"`) {
			t.Fatalf("enqueue: %d %s", code, out)
		}
	}
	if err := db.Get(&jobs, `SELECT count(*) FROM jobs`); err != nil || jobs != 1 {
		t.Fatalf("the same key twice made %d jobs (%v)", jobs, err)
	}

	out, code = cli(t, db, "audit", "verify")
	if code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify on an empty trail: %d %s", code, out)
	}
	out, code = cli(t, db, "purge", "--older-than", "30d")
	if code != 0 || !strings.Contains(out, "purged 0") {
		t.Fatalf("purge: %d %s", code, out)
	}
	out, code = cli(t, db, "audit", "verify")
	if code != 0 {
		t.Fatalf("audit verify: %d %s", code, out)
	}
}
