package cli

import (
	"bytes"
	"context"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's table of variables from the options table")

// result is what one in-process run of the binary printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, vars map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := Run(ctx, args, func(k string) string { return vars[k] }, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "help")
	if r.code != 0 {
		t.Fatalf("help: exit %d", r.code)
	}
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "\n  "+c.name+" ") {
			t.Errorf("the usage does not list %s:\n%s", c.name, r.stdout)
		}
	}
	if r := runCLI(t, nil, ""); r.code != 2 || !strings.Contains(r.stdout, "Commands:") {
		t.Errorf("no command: exit %d, want 2 and the usage", r.code)
	}
	if r := runCLI(t, nil, "", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, %q", r.code, r.stderr)
	}
}

// helpArgs runs each command's -h (a subcommand first where it needs one).
var helpArgs = map[string][]string{"user": {"user", "list", "-h"}, "token": {"token", "list", "-h"},
	"audit": {"audit", "verify", "-h"}, "search": {"search", "rebuild", "-h"}, "groups": {"groups", "rebuild", "-h"}}

// Merging and splitting groups is the console's: the CLI says where,
// rather than that the remote command takes no argument.
func TestGroupsEditPointsToTheConsole(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"merge", "split", "unmerge"} {
		r := runCLI(t, nil, "", "groups", sub, "0123456789abcdef")
		if r.code != 2 || !strings.Contains(r.stderr, "/groups/ID/edit") || !strings.Contains(r.stderr, "/api/v1/groups/ID/"+sub) {
			t.Errorf("groups %s: exit %d, %q", sub, r.code, r.stderr)
		}
	}
}

// flagLine finds the flags in -h output: "  -name value".
var flagLine = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// Every option of the table is some command's flag, every flag shows its
// help and environment variable, and no command has a flag outside the
// table.
func TestEveryOptionIsAFlagWithItsHelp(t *testing.T) {
	t.Parallel()
	used := map[string]bool{}
	for _, c := range commands() {
		args := cmpOr(helpArgs[c.name], []string{c.name, "-h"})
		r := runCLI(t, nil, "", args...)
		if r.code != 2 {
			t.Errorf("%s: exit %d, want 2", strings.Join(args, " "), r.code)
		}
		names := flagLine.FindAllStringSubmatch(r.stderr, -1)
		if len(names) == 0 {
			t.Errorf("%s lists no flags:\n%s", strings.Join(args, " "), r.stderr)
		}
		for _, m := range names {
			o := lookupOption(m[1])
			used[o.Name] = true
			if !strings.Contains(r.stderr, strings.Fields(o.Help)[0]) || (o.Env != "" && !strings.Contains(r.stderr, "env "+o.Env)) {
				t.Errorf("%s: --%s without its help or variable", c.name, o.Name)
			}
		}
	}
	seen := map[string]bool{}
	for _, o := range options {
		if seen[o.Name] {
			t.Errorf("--%s is twice in the table", o.Name)
		}
		seen[o.Name] = true
		if !used[o.Name] {
			t.Errorf("--%s is in the table but no command has it", o.Name)
		}
	}
}

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

// The environment sets a flag; the command line wins over it; a malformed
// variable is an error that names it.
func TestEnvironmentThenFlags(t *testing.T) {
	t.Parallel()
	parseWith := func(vars map[string]string, args ...string) (flags, error) {
		fs := newFlagSet("test", "", &bytes.Buffer{})
		register(fs, workerOptions)
		return parse(fs, args, func(k string) string { return vars[k] })
	}
	f, err := parseWith(map[string]string{"REDRIVE_LEASE": "7s", "REDRIVE_QUEUES": "a,b"}, "--queues", "c")
	if err != nil {
		t.Fatal(err)
	}
	if f.duration("lease") != 7*time.Second || f.str("queues") != "c" || f.integer("concurrency") != lookupOption("concurrency").Default {
		t.Errorf("lease %s, queues %q, concurrency %d", f.duration("lease"), f.str("queues"), f.integer("concurrency"))
	}
	if _, err := parseWith(map[string]string{"REDRIVE_LEASE": "soon"}); err == nil || !strings.Contains(err.Error(), "REDRIVE_LEASE") {
		t.Errorf("a malformed variable: %v", err)
	}
	if _, err := parseWith(nil, "stray"); exitCode(err) != 2 {
		t.Errorf("a stray argument: %v", err)
	}
}

// configurationDoc is the page that holds the configuration table, from
// this package's folder.
const configurationDoc = "../docs/configuration.md"

// docs/configuration.md's table of variables is the options table:
// regenerate it with go test ./cli -run TestConfigurationDoc -update.
func TestConfigurationDocTable(t *testing.T) {
	const begin, end = "<!-- begin configuration: generated from cli/flags.go -->\n", "<!-- end configuration -->"
	raw, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q block", configurationDoc, begin, end)
	}
	want := configurationTable()
	if got := doc[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(configurationDoc, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's configuration table differs from the options table (go test ./cli -run TestConfigurationDoc -update):\ngot\n%s\nwant\n%s", configurationDoc, got, want)
	}
}

// A seed that ends in the past (--ending-ago) leaves no group growing, so
// a retention purge deletes its settled letters rather than holding them:
// what `make bench SCALE=...` times.
func TestSeedEndingAgoLeavesNoGroupGrowing(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	vars := map[string]string{"DATABASE_URL": db.DSN, "USER": "tester"}
	if r := runCLI(t, vars, "", "seed", "--dead-letters", "10", "--ending-ago", "-1h"); r.code != 2 || !strings.Contains(r.stderr, "must not be negative") {
		t.Errorf("seed ending in the future: exit %d, %q", r.code, r.stderr)
	}
	if r := runCLI(t, vars, "", "seed", "--dead-letters", "200", "--ending-ago", "72h"); r.code != 0 {
		t.Fatalf("seed: exit %d\n%s", r.code, r.stderr)
	}
	var newest time.Time
	if err := db.QueryRow(`SELECT max(failed_at) FROM dead_letters`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if ago := time.Since(newest); ago < 72*time.Hour {
		t.Errorf("the newest letter failed %s ago, want at least 72h", ago)
	}
	r := runCLI(t, vars, "", "purge", "--older-than", "1h")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "purged ") || strings.HasPrefix(r.stdout, "purged 0 ") || strings.Contains(r.stdout, "held") {
		t.Errorf("purge: exit %d, %q, %q; want settled letters purged and none held", r.code, r.stdout, r.stderr)
	}
}

// The commands that only talk to the database, in process against a test
// database: what they print and what they leave.
func TestDatabaseCommands(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	vars := map[string]string{"DATABASE_URL": db.DSN, "USER": "tester"}
	ok := func(stdin string, args ...string) string {
		t.Helper()
		r := runCLI(t, vars, stdin, args...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	if out := ok("", "migrate"); !strings.HasPrefix(out, "schema at version ") {
		t.Errorf("migrate: %q", out)
	}
	if _, err := db.Exec(`INSERT INTO tasks (name) VALUES ('demo.ok')`); err != nil {
		t.Fatal(err)
	}
	if out := ok("", "enqueue", "--task", "demo.ok", "--args", "[1]"); !strings.Contains(out, `"task": "demo.ok"`) {
		t.Errorf("enqueue: %q", out)
	}
	if r := runCLI(t, vars, "", "enqueue"); r.code != 2 || !strings.Contains(r.stderr, "--task is required") {
		t.Errorf("enqueue without a task: exit %d, %q", r.code, r.stderr)
	}
	if out := ok("a long enough password\n", "user", "add", "ada", "--role", "operator"); out != "added ada (operator)\n" {
		t.Errorf("user add: %q", out)
	}
	if out := ok("", "user", "list"); !strings.Contains(out, "ada") || !strings.Contains(out, "operator") {
		t.Errorf("user list: %q", out)
	}
	if r := runCLI(t, vars, "", "user", "add", "bob", "--role", "king"); r.code != 2 {
		t.Errorf("user add with a bad role: exit %d, %q", r.code, r.stderr)
	}
	if secret := ok("", "token", "create", "--user", "ada", "--name", "ci"); !strings.HasPrefix(secret, dlq.TokenPrefix) {
		t.Errorf("token create: %q", secret)
	}
	if out := ok("", "token", "list"); !strings.Contains(out, "ci") {
		t.Errorf("token list: %q", out)
	}
	if out := ok("", "token", "revoke", "ci"); !strings.Contains(out, "revoked token") {
		t.Errorf("token revoke: %q", out)
	}
	if out := ok("", "audit", "verify"); !strings.Contains(out, "audit trail intact") {
		t.Errorf("audit verify: %q", out)
	}
	if out := ok("", "seed", "--dead-letters", "20"); !strings.HasPrefix(out, "inserted 20 dead letters") {
		t.Errorf("seed: %q", out)
	}
	if out := ok("", "purge", "--older-than", "30d"); !strings.HasPrefix(out, "purged 0 settled dead letters") {
		t.Errorf("purge: %q", out)
	}
	if r := runCLI(t, vars, "", "purge", "--older-than", "soon"); r.code != 2 {
		t.Errorf("purge with a bad age: exit %d", r.code)
	}
	if out := ok("", "search", "rebuild"); !strings.Contains(out, "rebuilt") {
		t.Errorf("search rebuild: %q", out)
	}
	if r := runCLI(t, nil, "", "migrate"); r.code != 1 || !strings.Contains(r.stderr, "no database") {
		t.Errorf("migrate without a database: exit %d, %q", r.code, r.stderr)
	}
}
