// Package remote is the on-call half of the redrive binary: commands that
// talk to a console over HTTP(S) with an API token (REDRIVE_URL,
// REDRIVE_TOKEN) instead of to the database. Each command group has its
// file; client.go is the typed API client they share.
package remote

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"
)

// Usage lists the remote commands, for the binary's help.
const Usage = `  letters     list or show dead letters (letters list, letters show ID)
  groups      the top error groups
  replay      replay letters in bulk: --ids, --filter or --group
  discard     discard letters in bulk: --ids, --filter or --group
  operations  bulk operations: list, watch ID, cancel ID, release ID
  sources     where letters come from, and whether each is importing
  schedules   periodic jobs: list, disable NAME, enable NAME (--reason)
  throttles   slow a queue or a task down: list, set, change ID, lift ID
  test-run    one test job from a letter's arguments (test-run ID --queue sandbox --wait)
  tasks       each task's runs, failures and timings: tasks [NAME]
  retention   the next purge and the held ones: retention [show], retention confirm GROUP
              (remote commands talk to a console: set REDRIVE_URL and REDRIVE_TOKEN)
`

// Environment variables of the remote commands.
const (
	EnvURL   = "REDRIVE_URL"
	EnvToken = "REDRIVE_TOKEN"
	// EnvRequireTLS, when "1" or "true", is --require-tls for every
	// command: for scripts and shells that must never send the token in
	// clear.
	EnvRequireTLS = "REDRIVE_REQUIRE_TLS"
)

// UsageError is a mistake on the command line (exit status 2).
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// env is what a command runs with.
type env struct {
	getenv func(string) string
	// stdout and stderr show control characters visibly (text.go); raw is
	// stdout itself, for the progress bars' own cursor movements.
	stdout, stderr, raw io.Writer
	// terminal: stdout is a terminal, so progress is a live bar rather
	// than one line per change.
	terminal bool
	// requireTLS is --require-tls, which every command's flags set.
	requireTLS *bool
}

func newEnv(getenv func(string) string, stdout, stderr io.Writer, terminal bool) env {
	return env{getenv: getenv, stdout: visibleWriter{stdout}, stderr: visibleWriter{stderr}, raw: stdout, terminal: terminal,
		requireTLS: new(bool)}
}

type command func(ctx context.Context, e env, args []string) error

var commands = map[string]command{
	"letters":    runLetters,
	"groups":     runGroups,
	"replay":     func(ctx context.Context, e env, args []string) error { return runBulk(ctx, e, "replay", args) },
	"discard":    func(ctx context.Context, e env, args []string) error { return runBulk(ctx, e, "discard", args) },
	"operations": runOperations,
	"sources":    runSources,
	"schedules":  runSchedules,
	"throttles":  runThrottles,
	"test-run":   runTestRun,
	"tasks":      runTasks,
	"retention":  runRetention,
}

// Handles reports whether name is a remote command.
func Handles(name string) bool {
	_, ok := commands[name]
	return ok
}

// Run runs the remote command args[0] with args[1:]. Errors the API
// answered are *APIError, in the API's words; command-line mistakes are
// *UsageError; -h is flag.ErrHelp.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if err := run(ctx, newEnv(getenv, stdout, stderr, isTerminal(stdout)), args); err != nil {
		return shownError{err}
	}
	return nil
}

// shownError is an error whose text shows control characters visibly: the
// API's messages, and an operation's error, quote what letters hold.
type shownError struct{ err error }

func (e shownError) Error() string { return block(e.err.Error()) }
func (e shownError) Unwrap() error { return e.err }

func run(ctx context.Context, e env, args []string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return usagef("%q is not a remote command", args[0])
	}
	return cmd(ctx, e, args[1:])
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// client reads REDRIVE_URL and REDRIVE_TOKEN.
func (e env) client() (*Client, error) {
	base := e.getenv(EnvURL)
	if base == "" {
		return nil, usagef("set %s to the console's address, e.g. %s=https://redrive.example.com", EnvURL, EnvURL)
	}
	c, err := NewClient(base, e.getenv(EnvToken), nil)
	if err != nil {
		return nil, &UsageError{Msg: err.Error()}
	}
	if c.base.Scheme == "http" && !isLoopback(c.base.Hostname()) {
		if *e.requireTLS || truthy(e.getenv(EnvRequireTLS)) {
			return nil, usagef("%s is http://, and --require-tls (or %s) refuses to send the API token in clear; use the console's https:// address", EnvURL, EnvRequireTLS)
		}
		fmt.Fprintf(e.stderr, "warning: %s is http://%s: the API token and every answer cross the network in clear; use https:// (--require-tls refuses http)\n",
			EnvURL, c.base.Host)
	}
	return c, nil
}

// isLoopback reports whether host names this machine, where http:// is
// only ever local.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func truthy(v string) bool { return v == "1" || strings.EqualFold(v, "true") }

// newFlags is a flag set whose errors and help go to stderr.
func newFlags(name, summary string, e env) *flag.FlagSet {
	fs := flag.NewFlagSet("redrive "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if e.requireTLS != nil {
		fs.BoolVar(e.requireTLS, "require-tls", false, "refuse an http:// console address (the token would cross the network in clear); also "+EnvRequireTLS+"=1")
	}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: redrive %s\n\n%s\n\nNeeds %s and %s.\n\nFlags:\n", name, summary, EnvURL, EnvToken)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, letting flags follow positional arguments
// ("show 12 --output json"), and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &UsageError{Msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest, args = append(rest, args[0]), args[1:]
	}
}

// outputFlag is --output table|json.
func outputFlag(fs *flag.FlagSet) *string {
	return fs.String("output", "table", "table or json")
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usagef("--output must be table or json, not %q", o)
	}
	return nil
}

// parseID reads a positive id argument.
func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, usagef("%s must be a positive whole number, not %q", what, s)
	}
	return id, nil
}

// ago says how long before now t was, coarsely.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// clip shortens s to n runes on one line, its controls shown.
func clip(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
