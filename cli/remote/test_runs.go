package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// TestRun is one test job of a letter, as GET
// /api/v1/dead-letters/{id}/test-runs answers it.
type TestRun struct {
	JobID        int64   `json:"job_id"`
	DeadLetterID int64   `json:"dead_letter_id"`
	Queue        string  `json:"queue"`
	State        string  `json:"state"`
	Attempt      int     `json:"attempt"`
	MaxAttempts  int     `json:"max_attempts"`
	LastError    *string `json:"last_error"`
	DiedAsLetter *int64  `json:"died_as_letter"`
}

// TestRunRequest asks for one test job: every field optional.
type TestRunRequest struct {
	Args        json.RawMessage `json:"args,omitempty"`
	Kwargs      json.RawMessage `json:"kwargs,omitempty"`
	Queue       string          `json:"queue,omitempty"`
	StartAt     *time.Time      `json:"start_at,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

// StartTestRun runs one test job of the letter id and returns its job id.
func (c *Client) StartTestRun(ctx context.Context, id int64, r TestRunRequest) (int64, error) {
	var out struct {
		TestJobID int64 `json:"test_job_id"`
	}
	_, err := c.do(ctx, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", id), nil, r, &out)
	return out.TestJobID, err
}

// TestRuns lists the letter id's newest test jobs.
func (c *Client) TestRuns(ctx context.Context, id int64) ([]TestRun, error) {
	var out struct {
		TestRuns []TestRun `json:"test_runs"`
	}
	_, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/dead-letters/%d/test-runs", id), nil, nil, &out)
	return out.TestRuns, err
}

// runTestRun is `redrive test-run ID`: one test job from a letter's
// arguments, followed with --wait until it succeeds or dies.
func runTestRun(ctx context.Context, e env, args []string) error {
	fs := newFlags("test-run ID [--queue Q] [--args JSON] [--kwargs JSON] [--start-at TIME] [--max-attempts N] [--reason TEXT] [--wait]",
		"Run one test job from a dead letter's arguments (or those given) before replaying it or its group. The letter stays pending. Audited.", e)
	var r TestRunRequest
	var argsJSON, kwargs, startAt string
	fs.StringVar(&r.Queue, "queue", "", "run the test job in this queue (a sandbox queue, usually) instead of the letter's own")
	fs.StringVar(&argsJSON, "args", "", "the test job's args, a JSON array, instead of the letter's")
	fs.StringVar(&kwargs, "kwargs", "", "the test job's kwargs, a JSON object, instead of the letter's")
	fs.StringVar(&startAt, "start-at", "", "start the test job at this time (RFC 3339) instead of now")
	fs.IntVar(&r.MaxAttempts, "max-attempts", 0, "give the test job this many attempts at most (0: one)")
	fs.StringVar(&r.Reason, "reason", "", "why, for the audit trail")
	wait := fs.Bool("wait", false, "follow the test job until it succeeds (exit 0) or dies (exit 1, with its error)")
	interval := fs.Duration("interval", time.Second, "how often --wait asks the console")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("give one dead letter id")
	}
	id, err := strconv.ParseInt(rest[0], 10, 64)
	if err != nil || id <= 0 {
		return usagef("%q is not a dead letter id (a positive whole number)", rest[0])
	}
	if *interval <= 0 {
		return usagef("--interval must be positive")
	}
	if err := r.setJSON(argsJSON, kwargs, startAt); err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	job, err := c.StartTestRun(ctx, id, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Test job %d enqueued for dead letter %d, which stays pending.\n", job, id)
	if !*wait {
		fmt.Fprintf(e.stdout, "Follow it: redrive test-run %d --wait, or the letter's page.\n", id)
		return nil
	}
	return followTestRun(ctx, e, c, id, job, *interval)
}

// setJSON checks the typed JSON flags (the console checks them again) and
// the start time.
func (r *TestRunRequest) setJSON(args, kwargs, startAt string) error {
	for _, f := range []struct {
		name, text string
		dst        *json.RawMessage
	}{{"--args", args, &r.Args}, {"--kwargs", kwargs, &r.Kwargs}} {
		if f.text == "" {
			continue
		}
		if !json.Valid([]byte(f.text)) {
			return usagef("%s is not valid JSON: %s", f.name, f.text)
		}
		*f.dst = json.RawMessage(f.text)
	}
	if startAt != "" {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(startAt))
		if err != nil {
			return usagef("--start-at %q is not an RFC 3339 time, e.g. 2026-12-07T18:30:00Z", startAt)
		}
		r.StartAt = &t
	}
	return nil
}

// followTestRun asks for the letter's test jobs every interval until job
// has finished, and says how.
func followTestRun(ctx context.Context, e env, c *Client, id, job int64, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := ""
	for {
		runs, err := c.TestRuns(ctx, id)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.JobID != job {
				continue
			}
			if r.State != last {
				fmt.Fprintf(e.stdout, "test job %d: %s (attempt %d of %d)\n", job, r.State, r.Attempt, r.MaxAttempts)
				last = r.State
			}
			switch r.State {
			case "succeeded", "":
				fmt.Fprintf(e.stdout, "Test job %d succeeded: the fix works for this letter.\n", job)
				return nil
			case "dead":
				msg := fmt.Sprintf("test job %d died", job)
				if r.LastError != nil {
					msg += ": " + oneLine(*r.LastError)
				}
				if r.DiedAsLetter != nil {
					msg += fmt.Sprintf(" (its letter %d is filed as a test and discarded)", *r.DiedAsLetter)
				}
				return fmt.Errorf("%s", msg)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
