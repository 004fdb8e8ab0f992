package remote

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

func runOperations(ctx context.Context, e env, args []string) error {
	subs := map[string]func(context.Context, env, []string) error{
		"list": runOperationList, "watch": runOperationWatch,
		"cancel": func(ctx context.Context, e env, args []string) error {
			return runOperationChange(ctx, e, "cancel", args)
		},
		"release": func(ctx context.Context, e env, args []string) error {
			return runOperationChange(ctx, e, "release", args)
		},
		"resume": func(ctx context.Context, e env, args []string) error {
			return runOperationChange(ctx, e, "resume", args)
		},
		"stop-following": func(ctx context.Context, e env, args []string) error {
			return runOperationChange(ctx, e, "stop-following", args)
		},
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stderr, "Usage: redrive operations list [--state S] [--limit N] [--output table|json]\n"+
			"       redrive operations watch ID\n       redrive operations cancel ID\n       redrive operations release ID [--wait]\n"+
			"       redrive operations resume ID [--wait]\n       redrive operations stop-following ID\n")
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return usagef("redrive operations needs a subcommand: list, watch ID, cancel ID, release ID, resume ID or stop-following ID")
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usagef("unknown operations subcommand %q: list, watch, cancel, release, resume or stop-following", args[0])
	}
	return sub(ctx, e, args[1:])
}

func runOperationList(ctx context.Context, e env, args []string) error {
	fs := newFlags("operations list [--state S] [--limit N] [--output table|json]", "Bulk operations, newest first.", e)
	state := fs.String("state", "", "only open (not finished) or finished operations, or those in one state: running, canary, canary_failed, auto_paused, settling, done, cancelled, failed")
	limit := fs.Int("limit", 20, "how many operations")
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	if *state != "" {
		q.Set("state", *state)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	ops, err := c.Operations(ctx, q)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, ops)
	}
	if len(ops) == 0 {
		fmt.Fprintln(e.stdout, "No operations.")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tDONE\tSKIPPED\tMATCHED\tSETTLED\tDIED AGAIN\tBY\tSTARTED\tREASON")
	for _, op := range ops {
		started := ""
		if op.CreatedAt != nil {
			started = ago(now, *op.CreatedAt)
		}
		settled, died := "-", "-"
		if r := op.Replays; r != nil {
			settled, died = strconv.FormatInt(r.Settled(), 10), strconv.FormatInt(r.DiedAgain, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", op.ID(), oneLine(op.Kind), oneLine(op.State), op.Acted(), op.Skipped,
			op.Matched, settled, died, oneLine(op.Actor), started, clip(op.Reason, 40))
	}
	return tw.Flush()
}

// idArg parses "ID [flags]" for the subcommands that take one operation.
func idArg(fs *flag.FlagSet, args []string) (int64, error) {
	rest, err := parse(fs, args)
	if err != nil {
		return 0, err
	}
	if len(rest) != 1 {
		return 0, usagef("give one operation id")
	}
	return parseID("the operation id", rest[0])
}

func runOperationWatch(ctx context.Context, e env, args []string) error {
	fs := newFlags("operations watch ID [--interval D]",
		"Follow an operation until it finishes (a replay: until every replay succeeded or died again), until its canary's jobs "+
			"have all succeeded or failed, or until the died-again guard pauses it.", e)
	interval := fs.Duration("interval", time.Second, "how often to ask the console")
	id, err := idArg(fs, args)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return usagef("--interval must be positive")
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	return watch(ctx, e, c, id, *interval)
}

func runOperationChange(ctx context.Context, e env, change string, args []string) error {
	summary := map[string]string{
		"cancel":         "Cancel a running operation, or one waiting for a decision; letters already done stay done.",
		"release":        "Release an operation waiting at its canary (also one whose canary died: release anyway): the rest of its letters follow.",
		"resume":         "Resume an operation the died-again guard paused: the rest of its letters follow.",
		"stop-following": "Stop following a settling operation: it is done now; its replays still running go on as any job does.",
	}[change]
	fs := newFlags("operations "+change+" ID", summary, e)
	wait := fs.Bool("wait", false, "then follow the operation until it finishes")
	interval := fs.Duration("interval", time.Second, "how often --wait asks the console")
	id, err := idArg(fs, args)
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return usagef("--interval must be positive")
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	op, err := c.ChangeOperation(ctx, id, change)
	if err != nil {
		return err
	}
	verb := map[string]string{"cancel": "cancelled", "release": "released", "resume": "resumed", "stop-following": "no longer followed"}[change]
	fmt.Fprintf(e.stdout, "Operation %d %s: %s, %d of %d letters done.\n", id, verb, oneLine(op.State), op.Acted(), op.Matched)
	if *wait && !op.Finished() {
		return watch(ctx, e, c, id, *interval)
	}
	return nil
}
