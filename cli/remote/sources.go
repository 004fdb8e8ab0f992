package remote

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"
)

func runSources(ctx context.Context, e env, args []string) error {
	fs := newFlags("sources [--output table|json]",
		"Where letters come from: Redrive's own queue, River queues and systems that send theirs over HTTP, with their letters and state", e)
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
	c, err := e.client()
	if err != nil {
		return err
	}
	srcs, err := c.Sources(ctx)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, srcs)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tKIND\tLETTERS\tPENDING\tLAST LETTER\tREAD TO THE END\tPROBLEM")
	for _, s := range srcs {
		last, checked, problem := "-", "-", ""
		if s.LastImportAt != nil {
			last = ago(now, *s.LastImportAt)
		}
		if s.CheckedAt != nil {
			checked = ago(now, *s.CheckedAt)
		}
		if s.LastError != nil {
			problem = clip("import failing: "+*s.LastError, 70)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", oneLine(s.Name), oneLine(s.Kind), s.Letters, s.Pending, last, checked, problem)
	}
	return tw.Flush()
}
