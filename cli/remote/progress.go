package remote

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// canaryTally counts where a canary's jobs are.
type canaryTally struct{ succeeded, dead, waiting int }

func tallyCanary(jobs []JobOutcome) canaryTally {
	var t canaryTally
	for _, j := range jobs {
		switch j.State {
		case "succeeded":
			t.succeeded++
		case "dead":
			t.dead++
		default: // available, running, retrying: not settled yet
			t.waiting++
		}
	}
	return t
}

// settled: every canary job has succeeded or died.
func (t canaryTally) settled() bool { return t.waiting == 0 && t.succeeded+t.dead > 0 }

// progressLine is one plain line of an operation's progress: its
// letters handed to the queue and, for a replay, its replays settled.
func progressLine(op Operation) string {
	verb := map[string]string{"replay": "replayed", "discard": "discarded"}[op.Kind]
	line := fmt.Sprintf("operation %d %s: %d of %d %s, %d skipped", op.ID(), oneLine(op.State), op.Acted(), op.Matched, verb, op.Skipped)
	if r := op.Replays; r != nil {
		line += fmt.Sprintf("; replays: %d of %d settled (%d succeeded, %d died again), %d running, %d waiting",
			r.Settled(), op.Acted(), r.Succeeded, r.DiedAgain, r.Running, r.Waiting)
	}
	if op.State == "canary" || op.State == "canary_failed" {
		t := tallyCanary(op.CanaryJobs)
		line += fmt.Sprintf("; canary jobs: %d succeeded, %d failed, %d still running", t.succeeded, t.dead, t.waiting)
	}
	return line
}

// progress shows an operation's progress: live bars on a terminal (one
// for the letters enqueued and, for a replay, one for its replays
// settled), a plain line per change elsewhere (logs, CI, pipes).
type progress struct {
	e                 env
	enqueued, settled *progressbar.ProgressBar
	last              string
	drawn             int // lines drawn on the terminal, to redraw over
}

func newBar(total int64, desc string) *progressbar.ProgressBar {
	// Rendered to nowhere: show draws the bars' text itself, so that two
	// of them can stand on two lines.
	return progressbar.NewOptions64(max(total, 1), progressbar.OptionSetWriter(io.Discard),
		progressbar.OptionSetDescription(desc), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
		progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(0))
}

func (p *progress) show(op Operation) {
	line := progressLine(op)
	if !p.e.terminal {
		if line != p.last {
			fmt.Fprintln(p.e.stdout, line)
		}
		p.last = line
		return
	}
	desc := fmt.Sprintf("%s #%d %s · enqueued", oneLine(op.Kind), op.ID(), oneLine(op.State))
	if op.State == "canary" || op.State == "canary_failed" {
		t := tallyCanary(op.CanaryJobs)
		desc += fmt.Sprintf(" (canary jobs: %d ok, %d failed, %d running)", t.succeeded, t.dead, t.waiting)
	}
	if p.enqueued == nil {
		p.enqueued = newBar(op.Matched, desc)
	}
	p.enqueued.Describe(desc)
	_ = p.enqueued.Set64(min(op.Acted()+op.Skipped, max(op.Matched, 1)))
	lines := []string{p.enqueued.String()}
	if r := op.Replays; r != nil && op.Kind == "replay" {
		total := max(op.Acted(), r.Settled()+r.Running+r.Waiting, 1)
		// A bar that has been full stays finished and stops drawing its
		// count, so one whose total grew (more letters handed over) is
		// drawn afresh rather than given a new maximum.
		if p.settled == nil || p.settled.GetMax64() != total {
			p.settled = newBar(total, "")
		}
		p.settled.Describe(fmt.Sprintf("replays settled: %d succeeded, %d died again, %d running, %d waiting",
			r.Succeeded, r.DiedAgain, r.Running, r.Waiting))
		_ = p.settled.Set64(min(r.Settled(), total))
		lines = append(lines, p.settled.String())
	}
	// Back to the first line drawn, then each line over the old one: the
	// cursor's moves go to the terminal as they are, the lines shown.
	if p.drawn > 1 {
		fmt.Fprintf(p.e.raw, "\x1b[%dA", p.drawn-1)
	}
	for i, l := range lines {
		if i > 0 {
			fmt.Fprint(p.e.stdout, "\n")
		}
		fmt.Fprint(p.e.raw, "\r\x1b[2K")
		fmt.Fprint(p.e.stdout, visible(strings.TrimLeft(l, "\r"), false))
	}
	p.drawn = len(lines)
}

// done ends the bars' lines so what follows starts on its own.
func (p *progress) done() {
	if p.drawn > 0 {
		fmt.Fprintln(p.e.stdout)
		p.drawn = 0
	}
}

// watch follows operation id until it finishes or waits at a settled
// canary, then says what happened and what to do next. A failed
// operation, and a canary whose jobs failed again, are errors (exit 1).
func watch(ctx context.Context, e env, c *Client, id int64, interval time.Duration) error {
	start := time.Now()
	p := &progress{e: e}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		op, err := c.Operation(ctx, id)
		if err != nil {
			p.done()
			return err
		}
		p.show(op)
		if op.Finished() {
			p.done()
			return finished(e, op, time.Since(start))
		}
		if op.State == "auto_paused" {
			p.done()
			return fmt.Errorf("operation %d auto-paused: more than %s of the first 100 replays to settle died again, so nothing more is released; "+
				"look at the new dead letters, then resume it (redrive operations resume %d --wait) or cancel it (redrive operations cancel %d)",
				id, guardWords(op), id, id)
		}
		if t := tallyCanary(op.CanaryJobs); (op.State == "canary" || op.State == "canary_failed") && t.settled() {
			p.done()
			if t.dead > 0 {
				failedAgain(e, op.CanaryJobs)
				return fmt.Errorf("canary of operation %d: %d of %d jobs failed again; cancel it (redrive operations cancel %d) "+
					"or release it anyway (redrive operations release %d --wait)", id, t.dead, t.succeeded+t.dead, id, id)
			}
			fmt.Fprintf(e.stdout, "Canary of operation %d: all %d jobs succeeded. Release the rest: redrive operations release %d --wait\n",
				id, t.succeeded, id)
			return nil
		}
		select {
		case <-ctx.Done():
			p.done()
			return fmt.Errorf("stopped watching operation %d (it goes on; watch it again with redrive operations watch %d): %w", id, id, ctx.Err())
		case <-tick.C:
		}
	}
}

// guardWords is the died-again guard's threshold in words.
func guardWords(op Operation) string {
	if op.DiedAgainPercent == nil {
		return "the threshold"
	}
	return strconv.FormatFloat(*op.DiedAgainPercent, 'f', -1, 64) + "%"
}

// finished reports a finished operation: its letters and, for a replay,
// what its replays did.
func finished(e env, op Operation, took time.Duration) error {
	verb := map[string]string{"replay": "replayed", "discard": "discarded"}[op.Kind]
	summary := fmt.Sprintf("Operation %d %s: %d of %d letters %s, %d skipped (no longer pending)", op.ID(), op.State, op.Acted(), op.Matched,
		verb, op.Skipped)
	if r := op.Replays; r != nil {
		summary += fmt.Sprintf("; replays: %d succeeded, %d died again", r.Succeeded, r.DiedAgain)
		if left := r.Waiting + r.Running; left > 0 {
			summary += fmt.Sprintf(", %d still waiting or running (no longer followed)", left)
		}
	}
	if op.State == "failed" {
		msg := "no reason given"
		if op.Error != nil {
			msg = *op.Error
		}
		return fmt.Errorf("%s: %s", summary, msg)
	}
	fmt.Fprintf(e.stdout, "%s, in %s.\n", summary, took.Round(100*time.Millisecond))
	return nil
}

// failedAgain lists a few of the canary's jobs that failed again, with
// their errors, so the decision to cancel needs no other command.
func failedAgain(e env, jobs []JobOutcome) {
	shown := 0
	for _, j := range jobs {
		if j.State != "dead" || shown == 3 {
			continue
		}
		shown++
		msg := "no error recorded"
		if j.LastError != nil {
			msg = *j.LastError
		}
		fmt.Fprintf(e.stdout, "  job %d (replay of letter %d) failed again: %s\n", j.JobID, j.DeadLetterID, clip(msg, 120))
	}
}
