package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redrive/redrive/store/groups"
)

// runGroups runs `redrive groups rebuild` here, against the database; every
// other use of `redrive groups` is the remote command over a console's API.
// An operator's merge or split of groups is not a command: it asks for
// a reason and a look at the groups' templates first, which the console's
// page shows (the API takes it too).
func runGroups(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && slices.Contains([]string{"merge", "split", "unmerge"}, args[0]) {
		return usagef("groups %s is not a command: merge and split error groups on the console's page /groups/ID/edit, "+
			"or with POST /api/v1/groups/ID/%s (see /api/v1/openapi.json)", args[0], args[0])
	}
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
	res, err := groups.New(db).RebuildGroups(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "regrouped %d letters into %d groups in %s: %d letters moved, %d group ids now redirect\n",
		res.Letters, res.Groups, time.Since(start).Round(time.Millisecond), res.Moved, res.Merged)
	return nil
}
