package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/access"
)

const userUsage = `Usage:
  redrive user add NAME [--role viewer|operator|admin]   add a user (asks for the password)
  redrive user passwd NAME                               set a new password; ends their sessions
  redrive user role NAME --role ROLE                     change a user's role
  redrive user disable NAME                              stop a user signing in; ends their sessions and tokens
  redrive user enable NAME                               let a disabled user sign in again
  redrive user list                                      list users

Passwords are read from the terminal without echo, or from the first line
of standard input when it is not a terminal; never from a flag, which
would leave them in shell history and the process list.`

// userRequest is one `redrive user` subcommand, parsed.
type userRequest struct {
	sub, name, role string
	change          dlq.UserChange
}

func runUser(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(e.stderr, userUsage)
		return usagef("redrive user needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("user "+sub, userUsage, e.stderr)
	register(fs, databaseOptions, []string{"role"})
	var name string
	if sub != "list" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(e.stderr, userUsage)
			return usagef("name the user first: redrive user %s NAME", sub)
		}
		name, args = args[0], args[1:]
	}
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	req := userRequest{sub: sub, name: name, role: f.str("role"),
		change: dlq.UserChange{Actor: cliActor(e.getenv), Now: time.Now()}}
	msg, err := changeUser(ctx, access.New(db), req, e)
	if err != nil {
		return err
	}
	if msg != "" {
		fmt.Fprintln(e.stdout, msg)
	}
	return nil
}

// changeUser carries out one user subcommand and says what it did.
func changeUser(ctx context.Context, store *access.Store, r userRequest, e env) (string, error) {
	switch r.sub {
	case "add":
		role := dlq.Role(r.role)
		if role == "" {
			role = dlq.RoleViewer
		}
		if !role.Valid() {
			return "", usagef("--role must be viewer, operator or admin, not %q", r.role)
		}
		hash, err := newPassword(r.name, e)
		if err != nil {
			return "", err
		}
		_, err = store.CreateUser(ctx, dlq.NewUser{Name: r.name, Role: role, PasswordHash: hash, Actor: r.change.Actor, Now: r.change.Now})
		return fmt.Sprintf("added %s (%s)", r.name, role), err
	case "passwd":
		hash, err := newPassword(r.name, e)
		if err != nil {
			return "", err
		}
		_, err = store.SetPassword(ctx, r.name, hash, r.change)
		return fmt.Sprintf("set a new password for %s; their sessions have ended", r.name), err
	case "role":
		_, err := store.SetRole(ctx, r.name, dlq.Role(r.role), r.change)
		return fmt.Sprintf("%s is now %s", r.name, r.role), err
	case "disable":
		_, err := store.DisableUser(ctx, r.name, r.change)
		return fmt.Sprintf("disabled %s; their sessions and tokens stopped working", r.name), err
	case "enable":
		_, err := store.EnableUser(ctx, r.name, r.change)
		return fmt.Sprintf("enabled %s", r.name), err
	case "list":
		return "", listUsers(ctx, store, e.stdout)
	default:
		fmt.Fprintln(e.stderr, userUsage)
		return "", usagef("unknown user subcommand %q", r.sub)
	}
}

// newPassword reads a new password for name and hashes it: twice, without
// echo, from a terminal; one line from anything else (a pipe, a file).
func newPassword(name string, e env) ([]byte, error) {
	var pw string
	if f, ok := e.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		first, err := readHidden(f, e.stderr, fmt.Sprintf("New password for %s: ", name))
		if err != nil {
			return nil, err
		}
		again, err := readHidden(f, e.stderr, "Again: ")
		if err != nil {
			return nil, err
		}
		if first != again {
			return nil, errors.New("the passwords differ; nothing changed")
		}
		pw = first
	} else {
		line, err := bufio.NewReader(e.stdin).ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			return nil, errors.New("no password on standard input: type it at a terminal, or pipe it in (one line)")
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	return dlq.HashPassword(name, pw, 0)
}

// readHidden prompts on w and reads a line from the terminal f without echo.
func readHidden(f *os.File, w io.Writer, prompt string) (string, error) {
	fmt.Fprint(w, prompt)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(w)
	if err != nil {
		return "", fmt.Errorf("read password: %w", err)
	}
	return string(b), nil
}

func listUsers(ctx context.Context, store *access.Store, w io.Writer) error {
	users, err := store.Users(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tSTATUS\tCREATED")
	for _, u := range users {
		status := "active"
		if !u.Active() {
			status = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Name, u.Role, status, u.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}
