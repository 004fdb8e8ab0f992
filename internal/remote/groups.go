package remote

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// groupSorts maps the CLI's orders to the API's.
var groupSorts = map[string]string{
	"pending": "pending", // most pending letters
	"newest":  "last_seen",
	"rate":    "rate", // most letters today and yesterday
	"total":   "total",
}

func runGroups(ctx context.Context, e env, args []string) error {
	fs := newFlags("groups [--sort newest|pending|rate|total] [--task T] [--limit N] [--output table|json]",
		"The top error groups: what broke. Replay one with: redrive replay --group FINGERPRINT", e)
	sort := fs.String("sort", "pending", "pending (most pending letters), newest (most recent letter), rate (most letters today and yesterday) or total")
	task := fs.String("task", "", "only this task's groups")
	limit := fs.Int("limit", 20, "how many groups")
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	apiSort, ok := groupSorts[*sort]
	if !ok {
		return usagef("--sort must be newest, pending, rate or total, not %q", *sort)
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	q := url.Values{"sort": {apiSort}, "limit": {strconv.Itoa(*limit)}}
	if *task != "" {
		q.Set("task", *task)
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	groups, err := c.Groups(ctx, q)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, groups)
	}
	if len(groups) == 0 {
		fmt.Fprintln(e.stdout, "No error groups.")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTASK\tPENDING\tTOTAL\tTODAY\tLAST SEEN\tERROR")
	for _, g := range groups {
		var today int64
		if n := len(g.Inflow); n > 0 {
			today = g.Inflow[n-1]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", g.Fingerprint, g.Task, g.Pending, g.Total, today,
			ago(now, g.LastSeen), clip(g.ErrorClass+": "+g.SampleMessage, 60))
	}
	return tw.Flush()
}
