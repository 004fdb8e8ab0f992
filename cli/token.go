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
  redrive token create --user NAME [--name LABEL]   print a new API token, once
  redrive token revoke ID|LABEL                     revoke a token
  redrive token list                                list active tokens

A token acts with its user's role: send it as Authorization: Bearer TOKEN.
Only its SHA-256 hash is stored, so it cannot be shown again.`

func runToken(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(e.stderr, tokenUsage)
		return usagef("redrive token needs a subcommand")
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("token "+sub, tokenUsage, e.stderr)
	register(fs, databaseOptions, []string{"user", "name"})
	var ref string
	if sub == "revoke" {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			fmt.Fprintln(e.stderr, tokenUsage)
			return usagef("name the token: redrive token revoke ID|LABEL")
		}
		ref, args = args[0], args[1:]
	}
	f, err := parse(fs, args, e.getenv)
	if err != nil {
		return err
	}
	if sub != "create" && sub != "revoke" && sub != "list" {
		fmt.Fprintln(e.stderr, tokenUsage)
		return usagef("unknown token subcommand %q", sub)
	}
	if sub == "create" && f.str("user") == "" {
		return usagef("--user is required")
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	store := access.New(db)
	actor := cliActor(e.getenv)
	switch sub {
	case "create":
		return createToken(ctx, store, dlq.NewToken{UserName: f.str("user"), Label: f.str("name"), Actor: actor, Now: time.Now()}, e)
	case "revoke":
		t, err := store.RevokeToken(ctx, ref, actor, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "revoked token %d %q of %s\n", t.ID, t.Label, t.UserName)
		return nil
	default:
		return listTokens(ctx, store, e.stdout)
	}
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
	fmt.Fprintln(tw, "ID\tLABEL\tUSER\tCREATED\tLAST USED")
	for _, t := range tokens {
		last := "never"
		if t.LastUsedAt != nil {
			last = t.LastUsedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", t.ID, t.Label, t.UserName, t.CreatedAt.UTC().Format(time.RFC3339), last)
	}
	return tw.Flush()
}
