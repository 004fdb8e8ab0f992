// Package cli is the redrive binary: Run parses the command line and runs
// one command. Each command has its own file; every flag, with its
// environment variable, default and help, is in the one table of
// flags.go. main only calls Run; tests call it in process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/redrive/redrive/cli/remote"
	"github.com/redrive/redrive/store/postgres"
)

// version is the build, set with
// -ldflags "-X github.com/redrive/redrive/cli.version=v1.2.3";
// when unset it comes from the VCS revision Go stamps into the binary.
var version = ""

// env is what a command may touch of the process.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// command is one subcommand: its name, its line in the usage, and what it
// runs. Adding a subcommand is one entry in commands.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, e env) error
}

// commands is every subcommand, in the order the usage lists them.
func commands() []command {
	return []command{
		{"dev", "everything in one process for a first look: a private Postgres\n(unless DATABASE_URL is set), migrations, demo tasks, demo traffic,\nthe console and a worker", runDev},
		{"serve", "run the console", runServe},
		{"worker", "run jobs", runWorker},
		{"migrate", "apply database migrations", runMigrate},
		{"enqueue", "enqueue one job", runEnqueue},
		{"seed", "insert synthetic dead letters in bulk (benchmarks, demos)", runSeed},
		{"user", "manage console users: add, passwd, role, disable, enable, list", runUser},
		{"token", "manage API tokens: create, revoke, list", runToken},
		{"audit", "verify the audit trail's hash chain (audit verify)", runAudit},
		{"purge", "delete replayed and discarded letters older than a retention age", runPurge},
		{"search", "rebuild the masked search text (search rebuild)", runSearch},
		{"groups", "regroup every stored letter (groups rebuild); other uses of\n'groups' are the remote command below", runGroups},
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString("redrive — dead-letter operations console and worker\n\nUsage: redrive <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, strings.ReplaceAll(c.summary, "\n", "\n            "))
	}
	b.WriteString("\nRun 'redrive <command> -h' for the flags of each.\n")
	b.WriteString("\nOn-call commands, over a console's API (cli/remote):\n" + remote.Usage)
	return b.String()
}

// Run runs the command line args (without the program name) and returns
// the exit status: 0, 1 for a failure, 2 for a mistake on the command line.
func Run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := run(ctx, args, env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr})
	if err == nil {
		return 0
	}
	if !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stderr, "redrive:", err)
	}
	return exitCode(err)
}

func run(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stdout, usage())
		if len(args) == 0 {
			return errNoCommand
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], e)
		}
	}
	if remote.Handles(args[0]) {
		return runRemote(ctx, args, e)
	}
	fmt.Fprint(e.stderr, usage())
	return usagef("unknown command %q", args[0])
}

// runRemote runs an on-call command over a console's API; its mistakes on
// the command line are usage errors like the local commands'.
func runRemote(ctx context.Context, args []string, e env) error {
	err := remote.Run(ctx, args, e.getenv, e.stdout, e.stderr)
	if ue := (*remote.UsageError)(nil); errors.As(err, &ue) {
		return usagef("%s", ue.Msg)
	}
	return err
}

func exitCode(err error) int {
	var ue *usageError
	if errors.Is(err, flag.ErrHelp) || errors.As(err, &ue) || errors.Is(err, errNoCommand) {
		return 2
	}
	return 1
}

// usageError is a mistake on the command line; it exits with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

var errNoCommand = errors.New("no command given")

func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("redrive "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: redrive %s [flags]\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// newLogger builds the logger --log-level and --log-format describe.
func newLogger(f flags, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.str("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format := f.str("log-format"); format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
	}
}

// openDB connects to the database named by --database-url.
func openDB(ctx context.Context, databaseURL string) (*sqlx.DB, error) {
	if databaseURL == "" {
		return nil, errors.New("no database: set DATABASE_URL or --database-url (or use `redrive dev`, which starts its own)")
	}
	return postgres.Open(ctx, databaseURL)
}

// Version is the build the binary reports: the -ldflags version, else the
// VCS revision, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				return s.Value[:7]
			}
		}
	}
	return "dev"
}
