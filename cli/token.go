package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/access"
)

const tokenUsage = `Usage:
  redrive token create --user NAME [--name LABEL] [--send-letters-of SOURCES]
                                                    print a new API token, once
  redrive token revoke ID|LABEL                     revoke a token
  redrive token list                                list active tokens

A token acts with its user's role: send it as Authorization: Bearer TOKEN.
With --send-letters-of it may only send the letters of those sources
(POST /api/v1/letters), nothing else: the token another system keeps.
Only its SHA-256 hash is stored, so it cannot be shown again.`

// runToken runs `redrive token`: create, revoke or list API tokens.
func runToken(ctx context.Context, args []string, e env) error {
	cmd, err := parseTokenArgs(args, e)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, cmd.flags.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	store := access.New(db)
	actor := cliActor(e.getenv)
	switch cmd.sub {
	case "create":
		return createToken(ctx, store, dlq.NewToken{UserName: cmd.flags.str("user"), Label: cmd.flags.str("name"),
			Sources: splitList(cmd.flags.str("send-letters-of")), Actor: actor, Now: time.Now()}, e)
	case "revoke":
		return revokeToken(ctx, store, cmd.ref, actor, e.stdout)
	default:
		return listTokens(ctx, store, e.stdout)
	}
}

// tokenCommand is a `redrive token` command line, read and checked.
type tokenCommand struct {
	sub   string // create, revoke or list
	ref   string // the token revoke names: an id or a label
	flags flags
}

// parseTokenArgs reads and checks the command line before the database is
// opened, so that a mistyped command fails with its usage and no
// connection.
func parseTokenArgs(args []string, e env) (tokenCommand, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(e.stderr, tokenUsage)
		return tokenCommand{}, usagef("redrive token needs a subcommand")
	}
	cmd := tokenCommand{sub: args[0]}
	args = args[1:]
	fs := newFlagSet("token "+cmd.sub, tokenUsage, e.stderr)
	register(fs, databaseOptions, []string{"user", "name", "send-letters-of"})
	if cmd.sub == "revoke" {
		var err error
		if cmd.ref, args, err = tokenRef(args, e); err != nil {
			return tokenCommand{}, err
		}
	}
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return tokenCommand{}, err
	}
	cmd.flags = f
	if cmd.sub != "create" && cmd.sub != "revoke" && cmd.sub != "list" {
		fmt.Fprintln(e.stderr, tokenUsage)
		return tokenCommand{}, usagef("unknown token subcommand %q", cmd.sub)
	}
	if cmd.sub == "create" && f.str("user") == "" {
		return tokenCommand{}, usagef("--user is required")
	}
	return cmd, nil
}

// tokenRef takes the token revoke names (an id or a label) from the front
// of args, where it must come before any flag, and returns the rest.
func tokenRef(args []string, e env) (string, []string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(e.stderr, tokenUsage)
		return "", nil, usagef("name the token: redrive token revoke ID|LABEL")
	}
	return args[0], args[1:], nil
}

// revokeToken revokes the token ref names and prints its id, label and
// user, so that the operator sees which token went.
func revokeToken(ctx context.Context, store *access.Store, ref string, actor dlq.Actor, w io.Writer) error {
	t, err := store.RevokeToken(ctx, ref, actor, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "revoked token %d %q of %s\n", t.ID, t.Label, t.UserName)
	return nil
}

// createToken makes a token and prints its secret, the one time it is known.
func createToken(ctx context.Context, store *access.Store, nt dlq.NewToken, e env) error {
	secret, err := dlq.NewTokenSecret()
	if err != nil {
		return err
	}
	nt.Hash = dlq.HashToken(secret)
	t, err := store.CreateToken(ctx, nt)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "Token %d %q for %s. It is shown only now: store it somewhere safe.\n", t.ID, t.Label, t.UserName)
	fmt.Fprintln(e.stdout, secret)
	return nil
}

func listTokens(ctx context.Context, store *access.Store, w io.Writer) error {
	tokens, err := store.Tokens(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLABEL\tUSER\tCREATED\tLAST USED\tMAY")
	for _, t := range tokens {
		last := "never"
		if t.LastUsedAt != nil {
			last = t.LastUsedAt.UTC().Format(time.RFC3339)
		}
		may := "act as its user"
		if len(t.Sources) > 0 {
			may = "send letters of " + strings.Join(t.Sources, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.UserName, t.CreatedAt.UTC().Format(time.RFC3339), last, may)
	}
	return tw.Flush()
}

// splitList reads a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
