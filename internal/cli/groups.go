package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/redrive/redrive/dlq"
)

// runGroups runs `redrive groups rebuild` here, against the database; every
// other use of `redrive groups` is the remote command over a console's API.
func runGroups(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || args[0] != "rebuild" {
		return runRemote(ctx, append([]string{"groups"}, args...), e)
	}
	fs := newFlagSet("groups rebuild", "Regroup every stored letter with the learned fingerprinter (package grouping),\n"+
		"in the order the letters failed. Group ids survive where they can; an id\n"+
		"that is gone redirects to the group that took most of its letters. Safe\n"+
		"beside a running console and worker: new letters wait while the groups'\n"+
		"counts are rewritten, and nothing is lost. Audited as a system action.", e.stderr)
	register(fs, databaseOptions, nil)
	f, err := parse(fs, args[1:], e.getenv)
	if err != nil {
		return err
	}
	db, err := openDB(ctx, f.str("database-url"))
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	res, err := dlq.NewStore(db).RebuildGroups(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "regrouped %d letters into %d groups in %s: %d letters moved, %d group ids now redirect\n",
		res.Letters, res.Groups, time.Since(start).Round(time.Millisecond), res.Moved, res.Merged)
	return nil
}
