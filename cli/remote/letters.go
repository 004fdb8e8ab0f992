package remote

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

func runLetters(ctx context.Context, e env, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "show") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(e.stderr, "Usage: redrive letters list [filters] [--output table|json]\n       redrive letters show ID [--output table|json]\n")
			return flag.ErrHelp
		}
		return usagef("redrive letters needs a subcommand: list or show ID")
	}
	if args[0] == "show" {
		return runLetterShow(ctx, e, args[1:])
	}
	return runLetterList(ctx, e, args[1:])
}

// letterFilters are the list's filters, as flags of the same names (with
// dashes) and query parameters (with underscores).
var letterFilters = []struct{ flag, param, help string }{
	{"task", "task", "only this task"},
	{"queue", "queue", "only this queue"},
	{"reason", "reason", "exhausted, permanent or lease_expired"},
	{"status", "status", "pending (default), replayed, discarded or all"},
	{"error-class", "error_class", "only this error class"},
	{"group", "fingerprint", "only this error group (fingerprint), or these: FP,FP,..."},
	{"q", "q", "search the error text and arguments, or by qualifiers: kwargs.customer_id:cus_9, args.0:42, kwargs.amount>100"},
	{"source", "source", "only the letters of this source (redrive, or a system that sends its letters)"},
	{"since", "since", "since a time (RFC 3339) or a duration ago (24h, 7d)"},
	{"until", "until", "until a time or a duration ago"},
	{"limit", "limit", "letters per page (default 50, at most 500)"},
	{"cursor", "cursor", "the next page's cursor, from the previous page"},
}

func runLetterList(ctx context.Context, e env, args []string) error {
	fs := newFlags("letters list [filters] [--output table|json]", "One page of dead letters, newest first.", e)
	vals := map[string]*string{}
	for _, f := range letterFilters {
		vals[f.param] = fs.String(f.flag, "", f.help)
	}
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q (filters are flags: --task, --since ...)", rest[0])
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range vals {
		if *v != "" {
			q.Set(k, *v)
		}
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	page, err := c.ListLetters(ctx, q)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, page)
	}
	if len(page.Items) == 0 {
		fmt.Fprintln(e.stdout, "No dead letters match.")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTASK\tERROR\tREASON\tSTATUS\tFAILED\tGROUP")
	for _, l := range page.Items {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, oneLine(l.Task), clip(l.ErrorClass+": "+l.Error, 60), oneLine(l.Reason),
			oneLine(l.Status), ago(now, l.FailedAt), oneLine(l.Fingerprint))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != nil {
		fmt.Fprintf(e.stdout, "More: add --cursor %s\n", oneLine(*page.NextCursor))
	}
	return nil
}

func runLetterShow(ctx context.Context, e env, args []string) error {
	fs := newFlags("letters show ID [--output table|json]", "One dead letter: its error, arguments, traceback and attempts.", e)
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("redrive letters show needs one letter id")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	id, err := parseID("the letter id", rest[0])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	d, err := c.Letter(ctx, id)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, d)
	}
	w := e.stdout
	fmt.Fprintf(w, "Dead letter %d  (%s, %s)\n", d.ID, oneLine(d.Status), oneLine(d.Reason))
	fmt.Fprintf(w, "  task      %s  (queue %s, job %d)\n", oneLine(d.Task), oneLine(d.Queue), d.JobID)
	fmt.Fprintf(w, "  error     %s: %s\n", oneLine(d.ErrorClass), oneLine(d.Error))
	fmt.Fprintf(w, "  attempts  %d of %d\n", d.Attempts, d.MaxAttempts)
	fmt.Fprintf(w, "  failed    %s\n", d.FailedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "  group     %s\n", oneLine(d.Fingerprint))
	fmt.Fprintf(w, "  args      %s\n  kwargs    %s\n", oneLine(string(d.Args)), oneLine(string(d.Kwargs)))
	if d.ReplayJobID != nil {
		fmt.Fprintf(w, "  replayed  as job %d\n", *d.ReplayJobID)
	}
	if len(d.History) > 0 {
		fmt.Fprintln(w, "Attempts:")
		for _, a := range d.History {
			fmt.Fprintf(w, "  #%d %s %s %s: %s\n", a.Attempt, a.At.Format(time.RFC3339), oneLine(a.Outcome), oneLine(a.Class), clip(a.Message, 100))
			if a.Logs != "" {
				fmt.Fprintf(w, "    logged:\n%s", indent(block(a.Logs), "      "))
			}
		}
	}
	if d.Traceback != "" {
		fmt.Fprintf(w, "Traceback:\n%s\n", block(d.Traceback))
		if d.TracebackTruncated {
			fmt.Fprintln(w, "  (truncated)")
		}
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(e env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// indent puts prefix before each line of s, which ends in a newline.
func indent(s, prefix string) string {
	s = strings.TrimSuffix(s, "\n")
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}
