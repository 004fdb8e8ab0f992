package remote

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// TaskTimings is a task's runs and timings, as GET /api/v1/tasks answers
// them: one window each for the last hour, day and two weeks.
type TaskTimings struct {
	Task    string         `json:"task"`
	Windows []TimingWindow `json:"windows"`
}

// TimingWindow is what a task did over one window; WaitMS and RunMS are
// nil when nothing ran.
type TimingWindow struct {
	Window      string     `json:"window"`
	Runs        int64      `json:"runs"`
	Failures    int64      `json:"failures"`
	DeadLetters int64      `json:"dead_letters"`
	WaitMS      *Quantiles `json:"wait_ms"`
	RunMS       *Quantiles `json:"run_ms"`
}

// Quantiles are a duration's p50, p95 and p99 in milliseconds.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Tasks lists every task that ran in the last two weeks with its timings.
func (c *Client) Tasks(ctx context.Context) ([]TaskTimings, error) {
	var out struct {
		Tasks []TaskTimings `json:"tasks"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/tasks", nil, nil, &out)
	return out.Tasks, err
}

// Task is one task's timings.
func (c *Client) Task(ctx context.Context, name string) (TaskTimings, error) {
	var out TaskTimings
	_, err := c.do(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

func runTasks(ctx context.Context, e env, args []string) error {
	fs := newFlags("tasks [NAME] [--output table|json]",
		"Each task's runs, failures, dead letters and p50/p95/p99 of queue wait and run time over the last hour, day and two weeks; NAME: one task.", e)
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 1 {
		return usagef("unexpected argument %q", rest[1])
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	var list []TaskTimings
	if len(rest) == 1 {
		t, err := c.Task(ctx, rest[0])
		if err != nil {
			return err
		}
		list = []TaskTimings{t}
	} else if list, err = c.Tasks(ctx); err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, list)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tWINDOW\tRUNS\tFAILED\tDEAD\tWAIT p50/p95/p99\tRUN p50/p95/p99")
	for _, t := range list {
		for _, w := range t.Windows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", oneLine(t.Task), w.Window, w.Runs, w.Failures, w.DeadLetters,
				quantilesText(w.WaitMS), quantilesText(w.RunMS))
		}
	}
	return tw.Flush()
}

// quantilesText is "12/40/95 ms", or "-" when nothing ran.
func quantilesText(q *Quantiles) string {
	if q == nil {
		return "-"
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	return f(q.P50) + "/" + f(q.P95) + "/" + f(q.P99) + " ms"
}

// Retention is what the next purge of settled letters removes, and the
// purges held for groups still growing, as GET /api/v1/retention answers.
type Retention struct {
	RetainLetters string      `json:"retain_letters"`
	NextPurge     *NextPurge  `json:"next_purge"`
	Holds         []PurgeHold `json:"holds"`
}

// NextPurge is the console's next scheduled purge.
type NextPurge struct {
	At            time.Time `json:"at"`
	SettledBefore time.Time `json:"settled_before"`
	Removes       int64     `json:"removes"`
	Capped        bool      `json:"capped"`
}

// PurgeHold is a purge held because its group is still growing.
type PurgeHold struct {
	Fingerprint   string    `json:"fingerprint"`
	Task          string    `json:"task"`
	Letters       int64     `json:"letters"`
	SettledBefore time.Time `json:"settled_before"`
	HeldAt        time.Time `json:"held_at"`
}

// Retention reads the next purge and the held ones.
func (c *Client) Retention(ctx context.Context) (Retention, error) {
	var out Retention
	_, err := c.do(ctx, http.MethodGet, "/api/v1/retention", nil, nil, &out)
	return out, err
}

// ConfirmPurge deletes the letters a purge held for group, and says how many.
func (c *Client) ConfirmPurge(ctx context.Context, group string) (int64, error) {
	var out struct {
		Purged int64 `json:"purged"`
	}
	_, err := c.do(ctx, http.MethodPost, "/api/v1/retention/holds/"+url.PathEscape(group)+"/confirm", nil, nil, &out)
	return out.Purged, err
}

func runRetention(ctx context.Context, e env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stderr, "Usage: redrive retention [show] [--output table|json]\n       redrive retention confirm GROUP\n")
		return flag.ErrHelp
	}
	if len(args) > 0 && args[0] == "confirm" {
		return runRetentionConfirm(ctx, e, args[1:])
	}
	if len(args) > 0 && args[0] == "show" {
		args = args[1:]
	}
	fs := newFlags("retention [show] [--output table|json]",
		"What the next purge of settled letters removes and when, and the purges held because their group is still growing.", e)
	output := outputFlag(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q (retention show, or retention confirm GROUP)", rest[0])
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	r, err := c.Retention(ctx)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, r)
	}
	now := time.Now()
	if p := r.NextPurge; p != nil {
		removes := strconv.FormatInt(p.Removes, 10)
		if p.Capped {
			removes = "over " + removes
		}
		fmt.Fprintf(e.stdout, "Next purge %s (%s): removes %s letters settled before %s (kept %s).\n",
			p.At.UTC().Format("2006-01-02 15:04Z"), ago(now, p.At), removes, p.SettledBefore.UTC().Format("2006-01-02 15:04Z"), r.RetainLetters)
	} else {
		fmt.Fprintln(e.stdout, "This console schedules no purge (REDRIVE_RETAIN_LETTERS is not set); `redrive purge` removes settled letters.")
	}
	if len(r.Holds) == 0 {
		fmt.Fprintln(e.stdout, "No purge is held.")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HELD GROUP\tTASK\tLETTERS\tSETTLED BEFORE\tHELD")
	for _, h := range r.Holds {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", oneLine(h.Fingerprint), oneLine(h.Task), h.Letters,
			h.SettledBefore.UTC().Format("2006-01-02 15:04Z"), ago(now, h.HeldAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "Confirm one: redrive retention confirm GROUP")
	return nil
}

func runRetentionConfirm(ctx context.Context, e env, args []string) error {
	fs := newFlags("retention confirm GROUP",
		"Delete the settled letters a purge held because their group was still growing. Audited; operators and admins.", e)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("retention confirm needs one error group's id")
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	n, err := c.ConfirmPurge(ctx, rest[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Purged %d settled letters of group %s.\n", n, rest[0])
	return nil
}
