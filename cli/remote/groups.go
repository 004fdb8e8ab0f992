package remote

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// groupSorts are the API's orders (GET /api/v1/groups?sort=), under the
// API's own names, so that `--sort newest` means what the console's and
// the API's "newest" mean, and each is described once for --help.
var groupSorts = []groupSort{
	{"pending", "most pending letters"},
	{"newest", "first seen most recently: what just started breaking"},
	{"last_hour", "most letters in the last hour"},
	{"rate", "most letters today and yesterday"},
	{"total", "most letters ever"},
	{"last_seen", "most recent letter"},
}

type groupSort struct{ name, help string }

// groupSortNames lists the orders, separated by sep.
func groupSortNames(sep string) string {
	names := make([]string, len(groupSorts))
	for i, s := range groupSorts {
		names[i] = s.name
	}
	return strings.Join(names, sep)
}

// groupSortHelp describes every order for the --sort flag.
func groupSortHelp() string {
	parts := make([]string, len(groupSorts))
	for i, s := range groupSorts {
		parts[i] = s.name + " (" + s.help + ")"
	}
	return strings.Join(parts, ", ")
}

func runGroups(ctx context.Context, e env, args []string) error {
	fs := newFlags("groups [--sort "+groupSortNames("|")+"] [--task T] [--limit N] [--output table|json]",
		"The top error groups: what broke. Replay one with: redrive replay --group FINGERPRINT", e)
	sort := fs.String("sort", "pending", groupSortHelp())
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
	if !slices.ContainsFunc(groupSorts, func(s groupSort) bool { return s.name == *sort }) {
		return usagef("--sort must be one of %s, not %q", groupSortNames(", "), *sort)
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	q := url.Values{"sort": {*sort}, "limit": {strconv.Itoa(*limit)}}
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", oneLine(g.Fingerprint), oneLine(g.Task), g.Pending, g.Total, today,
			ago(now, g.LastSeen), clip(g.ErrorClass+": "+g.SampleMessage, 60))
	}
	return tw.Flush()
}
