package remote

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// filterKeys are the keys --filter takes: the list's filters.
var filterKeys = []string{"task", "queue", "reason", "error_class", "q", "since", "until", "fingerprint", "source"}

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// bulkFlags is what replay and discard are asked to do.
type bulkFlags struct {
	ids      string
	filters  multiFlag
	group    string
	canary   int
	rate     float64
	reason   string
	dryRun   bool
	wait     bool
	interval time.Duration
	// where, from when and with how many attempts a replay runs
	queue       string
	startAt     string
	maxAttempts int
}

// request turns the flags into the API's request, or a usage error.
func (f bulkFlags) request(kind string) (BulkRequest, error) {
	r := BulkRequest{Canary: f.canary, RatePerSecond: f.rate, Reason: f.reason, DryRun: f.dryRun,
		Queue: f.queue, MaxAttempts: f.maxAttempts}
	if f.startAt != "" {
		at, err := time.Parse(time.RFC3339, f.startAt)
		if err != nil {
			return r, usagef("--start-at %q: a time such as 2026-12-07T18:30:00Z", f.startAt)
		}
		r.StartAt = &at
	}
	// The CLI follows the operation itself (--wait), so the call returns
	// as soon as the operation is stored.
	zero := 0.0
	r.WaitSeconds = &zero
	if err := f.check(kind); err != nil {
		return r, err
	}
	var err error
	if f.ids != "" {
		r.IDs, err = parseIDList(f.ids)
		return r, err
	}
	r.Filter, err = f.filter()
	if err != nil {
		return r, err
	}
	return r, nil
}

// check refuses flags that do not go together before anything is sent:
// the letters are named one way (ids, or a filter and groups), and the
// pace fits the kind of operation.
func (f bulkFlags) check(kind string) error {
	hasFilter := len(f.filters) > 0 || f.group != ""
	switch {
	case f.ids != "" && hasFilter:
		return usagef("give --ids, or --filter/--group, not both")
	case f.ids == "" && !hasFilter:
		return usagef("say which letters: --ids 1,2,3, --filter KEY=VALUE or --group FINGERPRINT[,FINGERPRINT...]")
	case f.canary < 0 || f.rate < 0:
		return usagef("--canary and --rate must not be negative")
	case f.canary > 0 && kind != "replay":
		return usagef("--canary is for replay: a discard has no jobs to watch")
	}
	return nil
}

// parseIDList reads --ids: letter ids separated by commas, spaces
// around each allowed.
func parseIDList(ids string) ([]int64, error) {
	var out []int64
	for _, s := range strings.Split(ids, ",") {
		id, err := parseID("each of --ids", strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// filter builds the API's filter from --group and each --filter
// KEY=VALUE; a key may be written with dashes (error-class) as on the
// command line. --filter fingerprint=FP overrides --group.
func (f bulkFlags) filter() (*BulkFilter, error) {
	bf := &BulkFilter{Fingerprint: f.group}
	fields := map[string]*string{"task": &bf.Task, "queue": &bf.Queue, "reason": &bf.Reason, "error_class": &bf.ErrorClass,
		"q": &bf.Q, "since": &bf.Since, "until": &bf.Until, "fingerprint": &bf.Fingerprint, "source": &bf.Source}
	for _, kv := range f.filters {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ReplaceAll(strings.TrimSpace(k), "-", "_")
		if !ok || !slices.Contains(filterKeys, k) {
			return nil, usagef("--filter takes KEY=VALUE with KEY one of %s, not %q", strings.Join(filterKeys, ", "), kv)
		}
		*fields[k] = v
	}
	return bf, nil
}

func runBulk(ctx context.Context, e env, kind string, args []string) error {
	usage := kind + " (--ids 1,2,3 | --filter KEY=VALUE... | --group FP[,FP...]) [--canary N] [--rate R] [--reason TEXT] [--dry-run] [--wait]"
	if kind == "replay" {
		usage += " [--queue Q] [--start-at TIME] [--max-attempts N]"
	}
	fs := newFlags(usage,
		"Start a bulk "+kind+" of pending dead letters on the console. --dry-run only counts them.", e)
	var f bulkFlags
	fs.StringVar(&f.ids, "ids", "", "letter ids, comma-separated")
	fs.Var(&f.filters, "filter", "KEY=VALUE, repeatable; keys: "+strings.Join(filterKeys, ", "))
	fs.StringVar(&f.group, "group", "", "every pending letter of this error group (fingerprint, from redrive groups), or of several: FP,FP,...")
	if kind == "replay" {
		fs.IntVar(&f.canary, "canary", 0, "replay this many letters first, then wait for: redrive operations release ID")
		fs.StringVar(&f.queue, "queue", "", "run the replayed jobs in this queue (a sandbox or debug queue) instead of each letter's own")
		fs.StringVar(&f.startAt, "start-at", "", "start the replayed jobs at this time (RFC 3339, e.g. 2026-12-07T18:30:00Z) instead of now")
		fs.IntVar(&f.maxAttempts, "max-attempts", 0, "give the replayed jobs this many attempts at most (0: each letter's own)")
	}
	fs.Float64Var(&f.rate, "rate", 0, "letters per second (0: as fast as the console goes)")
	fs.StringVar(&f.reason, "reason", "", "why, for the audit trail")
	fs.BoolVar(&f.dryRun, "dry-run", false, "count the letters; change nothing")
	fs.BoolVar(&f.wait, "wait", false, "follow the operation until it finishes (or its canary settles)")
	fs.DurationVar(&f.interval, "interval", time.Second, "how often --wait asks the console")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	req, err := f.request(kind)
	if err != nil {
		return err
	}
	if f.interval <= 0 {
		return usagef("--interval must be positive")
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	op, err := c.Bulk(ctx, kind, req)
	if err != nil {
		return err
	}
	if op.DryRun {
		fmt.Fprintf(e.stdout, "Dry run: %s would act on %d pending letters. Nothing was changed.\n", kind, op.Matched)
		return nil
	}
	fmt.Fprintf(e.stdout, "Operation %d: %s of %d letters started%s.\n", op.ID(), kind, op.Matched, describePace(op))
	if !f.wait {
		fmt.Fprintf(e.stdout, "Follow it: redrive operations watch %d\n", op.ID())
		return nil
	}
	return watch(ctx, e, c, op.ID(), f.interval)
}

// describePace says how the operation goes: its canary and rate.
func describePace(op Operation) string {
	var parts []string
	if op.Canary > 0 {
		parts = append(parts, "canary of "+strconv.Itoa(op.Canary))
	}
	if op.RatePerSecond != nil {
		parts = append(parts, strconv.FormatFloat(*op.RatePerSecond, 'f', -1, 64)+" per second")
	}
	if op.Queue != nil {
		parts = append(parts, "in queue "+*op.Queue)
	}
	if op.StartAt != nil {
		parts = append(parts, "from "+op.StartAt.UTC().Format(time.RFC3339))
	}
	if op.MaxAttempts != nil {
		parts = append(parts, "at most "+strconv.Itoa(*op.MaxAttempts)+" attempts")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
