package remote

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Throttle is a throttle as GET /api/v1/throttles answers it: an open
// one with its jobs running and waiting, or (recent) any.
type Throttle struct {
	ID           int64      `json:"id"`
	Kind         string     `json:"kind"`
	Name         string     `json:"name"`
	MaxRunning   *int       `json:"max_running"`
	MaxPerSecond *float64   `json:"max_per_second"`
	Reason       string     `json:"reason"`
	SetBy        string     `json:"set_by"`
	SetAt        time.Time  `json:"set_at"`
	Until        *time.Time `json:"until"`
	ChangedBy    *string    `json:"changed_by"`
	LiftedAt     *time.Time `json:"lifted_at"`
	LiftedBy     *string    `json:"lifted_by"`
	Expired      bool       `json:"expired"`
	Running      int64      `json:"running"`
	Waiting      int64      `json:"waiting"`
}

// limits says a throttle's limits in a few words.
func (t Throttle) limits() string {
	var parts []string
	if t.MaxRunning != nil {
		parts = append(parts, strconv.Itoa(*t.MaxRunning)+" running")
	}
	if t.MaxPerSecond != nil {
		parts = append(parts, strconv.FormatFloat(*t.MaxPerSecond, 'f', -1, 64)+"/s")
	}
	return strings.Join(parts, ", ")
}

// ThrottleRequest is the body of POST /api/v1/throttles and PATCH
// /api/v1/throttles/{id}.
type ThrottleRequest struct {
	Queue        string   `json:"queue,omitempty"`
	Task         string   `json:"task,omitempty"`
	MaxRunning   *int     `json:"max_running,omitempty"`
	MaxPerSecond *float64 `json:"max_per_second,omitempty"`
	Reason       string   `json:"reason"`
	For          string   `json:"for,omitempty"`
	Until        string   `json:"until,omitempty"`
}

type throttleAnswer struct {
	Throttle     Throttle `json:"throttle"`
	AuditEventID int64    `json:"audit_event_id"`
}

// Throttles reads the open throttles.
func (c *Client) Throttles(ctx context.Context) ([]Throttle, error) {
	var out struct {
		Throttles []Throttle `json:"throttles"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/throttles", nil, nil, &out)
	return out.Throttles, err
}

// SetThrottle throttles a queue or a task (id 0), or changes throttle id.
func (c *Client) SetThrottle(ctx context.Context, id int64, r ThrottleRequest) (Throttle, error) {
	var out throttleAnswer
	method, path := http.MethodPost, "/api/v1/throttles"
	if id != 0 {
		method, path = http.MethodPatch, "/api/v1/throttles/"+strconv.FormatInt(id, 10)
	}
	_, err := c.do(ctx, method, path, nil, r, &out)
	return out.Throttle, err
}

// LiftThrottle ends throttle id.
func (c *Client) LiftThrottle(ctx context.Context, id int64, reason string) (Throttle, error) {
	var out throttleAnswer
	_, err := c.do(ctx, http.MethodPost, "/api/v1/throttles/"+strconv.FormatInt(id, 10)+"/lift", nil,
		struct {
			Reason string `json:"reason,omitempty"`
		}{reason}, &out)
	return out.Throttle, err
}

const throttlesUsage = "Usage: redrive throttles list [--output table|json]\n" +
	"       redrive throttles set (--task T | --queue Q) [--max-running N] [--max-per-second R] --reason TEXT [--for D | --until T]\n" +
	"       redrive throttles change ID [--max-running N] [--max-per-second R] [--reason TEXT] [--for D | --until T]\n" +
	"       redrive throttles lift ID [--reason TEXT]\n"

func runThrottles(ctx context.Context, e env, args []string) error {
	subs := map[string]func(context.Context, env, []string) error{
		"list": runThrottleList, "set": runThrottleSet, "change": runThrottleChange, "lift": runThrottleLift,
	}
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stderr, throttlesUsage)
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return usagef("redrive throttles needs a subcommand: list, set, change ID or lift ID")
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usagef("unknown throttles subcommand %q: list, set, change or lift", args[0])
	}
	return sub(ctx, e, args[1:])
}

func runThrottleList(ctx context.Context, e env, args []string) error {
	fs := newFlags("throttles list [--output table|json]", "The open throttles, with their jobs running and waiting now.", e)
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
	ts, err := c.Throttles(ctx)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, ts)
	}
	if len(ts) == 0 {
		fmt.Fprintln(e.stdout, "Nothing is throttled.")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTHROTTLED\tLIMITS\tRUNNING\tWAITING\tBY\tSINCE\tUNTIL\tREASON")
	for _, t := range ts {
		until := "lifted by hand"
		if t.Until != nil {
			until = t.Until.UTC().Format("2006-01-02 15:04 UTC")
		}
		fmt.Fprintf(tw, "%d\t%s %s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", t.ID, oneLine(t.Kind), oneLine(t.Name), t.limits(), t.Running, t.Waiting,
			oneLine(t.SetBy), ago(now, t.SetAt), until, clip(t.Reason, 40))
	}
	return tw.Flush()
}

// throttleFlags are the flags set and change share.
type throttleFlags struct {
	maxRunning   *int
	maxPerSecond *float64
	reason, dur  *string
	until        *string
}

func newThrottleFlags(fs *flag.FlagSet) throttleFlags {
	return throttleFlags{
		maxRunning:   fs.Int("max-running", 0, "at most this many of its jobs run at once, across all workers"),
		maxPerSecond: fs.Float64("max-per-second", 0, "at most this many of its jobs start a second (0.5: one every 2 s)"),
		reason:       fs.String("reason", "", "why, for whoever finds the throttle (the banner shows it)"),
		dur:          fs.String("for", "", "lift it by itself after this long (30m, 2h)"),
		until:        fs.String("until", "", "lift it by itself at this time (14:30 UTC, or 2026-12-01T14:30:00Z)"),
	}
}

// request is the flags as the API's body; set names the flags given.
func (f throttleFlags) request(set map[string]bool) ThrottleRequest {
	r := ThrottleRequest{Reason: *f.reason, For: *f.dur, Until: *f.until}
	if set["max-running"] {
		r.MaxRunning = f.maxRunning
	}
	if set["max-per-second"] {
		r.MaxPerSecond = f.maxPerSecond
	}
	return r
}

func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

func runThrottleSet(ctx context.Context, e env, args []string) error {
	fs := newFlags("throttles set (--task T | --queue Q) [--max-running N] [--max-per-second R] --reason TEXT [--for D | --until T]",
		"Throttle a queue or a task: slow it down instead of stopping it. Audited; the console's banner shows it.", e)
	task := fs.String("task", "", "throttle this task's jobs, on any queue")
	queue := fs.String("queue", "", "throttle this queue's jobs")
	f := newThrottleFlags(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if (*task == "") == (*queue == "") {
		return usagef("give --task or --queue: what to throttle")
	}
	r := f.request(flagsSet(fs))
	r.Task, r.Queue = *task, *queue
	c, err := e.client()
	if err != nil {
		return err
	}
	t, err := c.SetThrottle(ctx, 0, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Throttle %d: %s %s to %s.\n", t.ID, oneLine(t.Kind), oneLine(t.Name), t.limits())
	return nil
}

// runThrottleChange changes an open throttle: what the flags leave out
// (a limit, the reason, the expiry) stays as it is.
func runThrottleChange(ctx context.Context, e env, args []string) error {
	fs := newFlags("throttles change ID [--max-running N] [--max-per-second R] [--reason TEXT] [--for D | --until T]",
		"Change an open throttle's limits, reason or expiry; what you leave out stays. --max-running 0 or --max-per-second 0 removes that limit.", e)
	f := newThrottleFlags(fs)
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("give one throttle id")
	}
	id, err := parseID("the throttle id", rest[0])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	open, err := c.Throttles(ctx)
	if err != nil {
		return err
	}
	set := flagsSet(fs)
	r := f.request(set)
	for _, t := range open {
		if t.ID != id {
			continue
		}
		if !set["max-running"] {
			r.MaxRunning = t.MaxRunning
		}
		if !set["max-per-second"] {
			r.MaxPerSecond = t.MaxPerSecond
		}
		if !set["reason"] {
			r.Reason = t.Reason
		}
		if !set["for"] && !set["until"] && t.Until != nil {
			r.Until = t.Until.UTC().Format(time.RFC3339)
		}
	}
	if r.MaxRunning != nil && *r.MaxRunning == 0 {
		r.MaxRunning = nil
	}
	if r.MaxPerSecond != nil && *r.MaxPerSecond == 0 {
		r.MaxPerSecond = nil
	}
	t, err := c.SetThrottle(ctx, id, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Throttle %d: %s %s now to %s.\n", t.ID, oneLine(t.Kind), oneLine(t.Name), t.limits())
	return nil
}

func runThrottleLift(ctx context.Context, e env, args []string) error {
	fs := newFlags("throttles lift ID [--reason TEXT]", "Lift a throttle: workers take its jobs as fast as they can again. Audited.", e)
	reason := fs.String("reason", "", "why, for the audit trail")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("give one throttle id")
	}
	id, err := parseID("the throttle id", rest[0])
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	t, err := c.LiftThrottle(ctx, id, *reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Lifted throttle %d of %s %s.\n", t.ID, oneLine(t.Kind), oneLine(t.Name))
	return nil
}
