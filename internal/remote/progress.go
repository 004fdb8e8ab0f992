package remote

import (
	"context"
	"fmt"
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

// progressLine is one plain line of an operation's progress.
func progressLine(op Operation) string {
	verb := map[string]string{"replay": "replayed", "discard": "discarded"}[op.Kind]
	line := fmt.Sprintf("operation %d %s: %d of %d %s, %d skipped", op.ID(), op.State, op.Acted(), op.Matched, verb, op.Skipped)
	if op.State == "canary" {
		t := tallyCanary(op.CanaryJobs)
		line += fmt.Sprintf("; canary jobs: %d succeeded, %d failed, %d still running", t.succeeded, t.dead, t.waiting)
	}
	return line
}

// progress shows an operation's progress: a live bar on a terminal, a
// plain line per change elsewhere (logs, CI, pipes).
type progress struct {
	e    env
	bar  *progressbar.ProgressBar
	last string
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
	desc := fmt.Sprintf("%s #%d %s", op.Kind, op.ID(), op.State)
	if op.State == "canary" {
		t := tallyCanary(op.CanaryJobs)
		desc += fmt.Sprintf(" (jobs: %d ok, %d failed, %d running)", t.succeeded, t.dead, t.waiting)
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions64(max(op.Matched, 1), progressbar.OptionSetWriter(p.e.stdout),
			progressbar.OptionSetDescription(desc), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(true))
	}
	p.bar.Describe(desc)
	_ = p.bar.Set64(min(op.Acted()+op.Skipped, max(op.Matched, 1)))
}

// done ends the bar's line so what follows starts on its own.
func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Exit()
		fmt.Fprintln(p.e.stdout)
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
		if t := tallyCanary(op.CanaryJobs); op.State == "canary" && t.settled() {
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

// finished reports a finished operation.
func finished(e env, op Operation, took time.Duration) error {
	verb := map[string]string{"replay": "replayed", "discard": "discarded"}[op.Kind]
	summary := fmt.Sprintf("Operation %d %s: %d of %d letters %s, %d skipped (no longer pending)", op.ID(), op.State, op.Acted(), op.Matched,
		verb, op.Skipped)
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
