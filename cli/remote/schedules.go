package remote

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// Schedule is a periodic job a worker registered, as GET /api/v1/schedules
// answers it.
type Schedule struct {
	Name         string        `json:"name"`
	Cron         *string       `json:"cron"`
	EveryMS      *int64        `json:"every_ms"`
	Timezone     string        `json:"timezone"`
	Task         string        `json:"task"`
	Queue        string        `json:"queue"`
	NextRunAt    time.Time     `json:"next_run_at"`
	Enabled      bool          `json:"enabled"`
	ChangedBy    *string       `json:"changed_by"`
	ChangedAt    *time.Time    `json:"changed_at"`
	ChangeReason *string       `json:"change_reason"`
	Runs         []ScheduleRun `json:"runs"`
}

// ScheduleRun is one occurrence a schedule enqueued.
type ScheduleRun struct {
	OccurrenceAt time.Time `json:"occurrence_at"`
	JobID        int64     `json:"job_id"`
	State        string    `json:"state"`
	DeadLetterID *int64    `json:"dead_letter_id"`
}

// When says when the schedule runs.
func (s Schedule) When() string {
	if s.Cron != nil {
		return *s.Cron + " (" + s.Timezone + ")"
	}
	if s.EveryMS != nil {
		return "every " + (time.Duration(*s.EveryMS) * time.Millisecond).String()
	}
	return "-"
}

// Schedules lists the schedules, each with its latest runs.
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/schedules", nil, nil, &out)
	return out.Schedules, err
}

// ChangeSchedule disables ("disable") or enables ("enable") a schedule.
func (c *Client) ChangeSchedule(ctx context.Context, name, change, reason string) (Schedule, error) {
	var out struct {
		Schedule Schedule `json:"schedule"`
	}
	_, err := c.do(ctx, http.MethodPost, "/api/v1/schedules/"+url.PathEscape(name)+"/"+change, nil,
		map[string]string{"reason": reason}, &out)
	return out.Schedule, err
}

func runSchedules(ctx context.Context, e env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stderr, "Usage: redrive schedules list [--output table|json]\n"+
			"       redrive schedules disable NAME --reason R\n       redrive schedules enable NAME --reason R\n")
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return usagef("redrive schedules needs a subcommand: list, disable NAME or enable NAME")
	}
	switch args[0] {
	case "list":
		return runScheduleList(ctx, e, args[1:])
	case "disable", "enable":
		return runScheduleChange(ctx, e, args[0], args[1:])
	}
	return usagef("unknown schedules subcommand %q: list, disable or enable", args[0])
}

func runScheduleList(ctx context.Context, e env, args []string) error {
	fs := newFlags("schedules list [--output table|json]",
		"The periodic jobs the workers register: when each runs, its next run, its last run and whether it is enabled.", e)
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
	list, err := c.Schedules(ctx)
	if err != nil {
		return err
	}
	if *output == "json" {
		return writeJSON(e, list)
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tWHEN\tTASK\tNEXT RUN\tLAST RUN\tSTATE")
	for _, s := range list {
		next, last, state := s.NextRunAt.UTC().Format("2006-01-02 15:04:05Z"), "-", "enabled"
		if !s.Enabled {
			next, state = "-", "disabled"
			if s.ChangedBy != nil && s.ChangeReason != nil {
				state = clip(fmt.Sprintf("disabled by %s: %s", *s.ChangedBy, *s.ChangeReason), 60)
			}
		}
		if len(s.Runs) > 0 {
			r := s.Runs[0]
			outcome := r.State
			if outcome == "" {
				outcome = "succeeded"
			}
			last = fmt.Sprintf("%s, %s (job %d)", ago(now, r.OccurrenceAt), outcome, r.JobID)
			if r.DeadLetterID != nil {
				last += fmt.Sprintf(", letter %d", *r.DeadLetterID)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(s.Name), oneLine(s.When()), oneLine(s.Task), next, last, state)
	}
	return tw.Flush()
}

func runScheduleChange(ctx context.Context, e env, change string, args []string) error {
	summary := map[string]string{
		"disable": "Disable a schedule: its occurrences enqueue nothing until it is enabled again. Audited.",
		"enable":  "Enable a disabled schedule: its next occurrence is enqueued; those that passed meanwhile are not made up. Audited.",
	}[change]
	fs := newFlags("schedules "+change+" NAME --reason R", summary, e)
	reason := fs.String("reason", "", "why (required): kept in the audit trail and shown on the schedules page")
	rest, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usagef("give one schedule name")
	}
	if strings.TrimSpace(*reason) == "" {
		return usagef("--reason is required: say why you %s %s", change, rest[0])
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	s, err := c.ChangeSchedule(ctx, rest[0], change, *reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Schedule %s %sd (%s, task %s).\n", oneLine(s.Name), change, oneLine(s.When()), oneLine(s.Task))
	return nil
}
