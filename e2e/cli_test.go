package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
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
		// -trimpath as `make build`: frames name modules, not this clone's folder.
		out, err := exec.Command("go", "build", "-trimpath", "-o", binPath, "..").CombinedOutput()
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
func cli(t *testing.T, db *storetest.DB, args ...string) (string, int) {
	t.Helper()
	return cliWithInput(t, db, "", args...)
}

// cliWithInput is cli with stdin, for the commands that read a password.
func cliWithInput(t *testing.T, db *storetest.DB, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(redriveBinary(t), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.DSN)
	cmd.Stdin = strings.NewReader(stdin)
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
	db := storetest.NewDB(t)

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
		"purge without an age":  {"purge"},
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

// The account commands: a password only ever from stdin, a token shown once
// and working against the API, disabling a user stopping the token, and
// every change audited.
func TestCLIUsersAndTokens(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)

	for name, c := range map[string]struct {
		stdin string
		args  []string
	}{
		"no password":  {"", []string{"user", "add", "alice", "--role", "operator"}},
		"bad role":     {"pw-long-enough-1\n", []string{"user", "add", "alice", "--role", "root"}},
		"no name":      {"", []string{"user", "add", "--role", "admin"}},
		"short pw":     {"short\n", []string{"user", "add", "alice"}},
		"common pw":    {"password123\n", []string{"user", "add", "alice"}},
		"pw is name":   {"alice12345\n", []string{"user", "add", "alice12345"}},
		"token nobody": {"", []string{"token", "create", "--user", "nobody"}},
	} {
		out, code := cliWithInput(t, db, c.stdin, c.args...)
		if code == 0 || strings.Contains(out, "goroutine ") {
			t.Errorf("%s: want a clear error, got exit %d:\n%s", name, code, out)
		}
	}
	var users int
	if err := db.Get(&users, `SELECT count(*) FROM users`); err != nil || users != 0 {
		t.Fatalf("refused commands left %d users (%v)", users, err)
	}

	out, code := cliWithInput(t, db, "correct horse battery staple\n", "user", "add", "alice", "--role", "operator")
	if code != 0 || !strings.Contains(out, "added alice (operator)") {
		t.Fatalf("user add: %d %s", code, out)
	}
	out, code = cli(t, db, "user", "list")
	if code != 0 || !regexp.MustCompile(`alice\s+operator\s+active`).MatchString(out) {
		t.Fatalf("user list: %d %s", code, out)
	}
	cmd := exec.Command(redriveBinary(t), "token", "create", "--user", "alice", "--name", "ci")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.DSN)
	secret, err := cmd.Output() // stdout holds the secret alone
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	token := strings.TrimSpace(string(secret))
	store := storetest.NewStores(db.DB)
	if u, _, err := store.Access.UserByToken(context.Background(), dlq.HashToken(token), time.Now()); err != nil || u.Name != "alice" {
		t.Fatalf("the printed token does not authenticate alice: %v %+v", err, u)
	}
	out, code = cli(t, db, "user", "disable", "alice")
	if code != 0 || !strings.Contains(out, "disabled alice") {
		t.Fatalf("user disable: %d %s", code, out)
	}
	if _, _, err := store.Access.UserByToken(context.Background(), dlq.HashToken(token), time.Now()); err == nil {
		t.Fatal("a disabled user's token still authenticates")
	}
	var audited int
	if err := db.Get(&audited, `SELECT count(*) FROM audit_events WHERE actor LIKE 'cli%'`); err != nil || audited < 3 {
		t.Fatalf("%d CLI changes audited (%v), want user add, token create and user disable", audited, err)
	}
}

// Retention of processed event ids: old ones go, recent ones stay.
func TestCLIPurgeProcessedEvents(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	if _, err := db.Exec(`INSERT INTO processed_events (external_id, received_at) VALUES
		('evt-old-1', now() - interval '100 days'), ('evt-old-2', now() - interval '91 days'),
		('evt-recent', now() - interval '2 days')`); err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, db, "purge", "--processed-events-older-than", "90d")
	if code != 0 || !strings.Contains(out, "purged 2 processed event ids") {
		t.Fatalf("purge: %d %s", code, out)
	}
	var left []string
	if err := db.Select(&left, `SELECT external_id FROM processed_events`); err != nil || len(left) != 1 || left[0] != "evt-recent" {
		t.Fatalf("left %v (%v), want only evt-recent", left, err)
	}
}
