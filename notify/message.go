package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
)

// Message is the JSON body of a notification. Delivery is at least once:
// a receiver that must act once deduplicates on ID.
type Message struct {
	ID    int64     `json:"id"`
	Event string    `json:"event"`
	At    time.Time `json:"at"`
	Title string    `json:"title"`
	Text  string    `json:"text"`
	// URL is the console page to open.
	URL   string          `json:"url"`
	Facts json.RawMessage `json:"facts"`
}

// compose turns an event into its message, reading what it is about as it
// is now (a group's counts, an operation's progress), masked.
func (s *Sender) compose(ctx context.Context, ev dlq.NotificationEvent) (Message, error) {
	m := Message{ID: ev.ID, Event: ev.Kind, At: ev.At.UTC(), Facts: ev.Facts, URL: s.link(ev.ConsolePath())}
	var facts struct {
		Task          string `json:"task"`
		ErrorClass    string `json:"error_class"`
		Count         int    `json:"count"`
		AtLeast       bool   `json:"at_least"`
		WindowSeconds int    `json:"window_seconds"`
	}
	_ = json.Unmarshal(ev.Facts, &facts) // facts are ours; an unexpected shape leaves them empty
	switch ev.Kind {
	case dlq.NotifyGroupNew, dlq.NotifyGroupSpike:
		g, err := s.cfg.Store.Group(ctx, ev.Subject)
		if err != nil && !errors.Is(err, dlq.ErrNotFound) {
			return Message{}, err
		}
		if err == nil {
			facts.Task, facts.ErrorClass = g.Task, g.ErrorClass
		}
		if ev.Kind == dlq.NotifyGroupNew {
			m.Title = fmt.Sprintf("New error group: %s in %s", facts.ErrorClass, facts.Task)
		} else {
			n := strconv.Itoa(facts.Count)
			if facts.AtLeast {
				n = "more than " + n
			}
			m.Title = fmt.Sprintf("Error group spiking: %s in %s, %s letters in %s", facts.ErrorClass, facts.Task, n,
				time.Duration(facts.WindowSeconds)*time.Second)
		}
		if err == nil {
			sample := s.cfg.Masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
			m.Text = fmt.Sprintf("%s\n%d pending of %d, first seen %s, last seen %s", clip(sample, 300), g.Pending, g.Total,
				g.FirstSeen.UTC().Format(time.RFC3339), g.LastSeen.UTC().Format(time.RFC3339))
		} else {
			m.Text = "The group has no letters left."
		}
	case dlq.NotifyOperationDone, dlq.NotifyOperationFailed, dlq.NotifyOperationCancelled,
		dlq.NotifyOperationAutoPaused, dlq.NotifyOperationCanaryFailed:
		id, err := strconv.ParseInt(ev.Subject, 10, 64)
		if err != nil {
			return Message{}, fmt.Errorf("event %d: operation id %q: %w", ev.ID, ev.Subject, err)
		}
		op, err := s.cfg.Store.Operation(ctx, id)
		if err != nil {
			return Message{}, err
		}
		verb := map[string]string{dlq.NotifyOperationDone: "finished", dlq.NotifyOperationFailed: "failed",
			dlq.NotifyOperationCancelled:    "was cancelled",
			dlq.NotifyOperationAutoPaused:   "auto-paused: too many replays died again",
			dlq.NotifyOperationCanaryFailed: "waits: its canary died again"}[ev.Kind]
		m.Title = fmt.Sprintf("Bulk %s #%d %s", op.Kind, op.ID, verb)
		m.Text = fmt.Sprintf("%d of %d letters handled, %d skipped; started by %s", op.Done, op.Matched, op.Skipped, op.Actor)
		if op.Replays != nil {
			r := op.Replays
			m.Text += fmt.Sprintf("\nReplays: %d succeeded, %d died again, %d still waiting or running", r.Succeeded, r.DiedAgain, r.Waiting+r.Running)
		}
		switch {
		case ev.Kind == dlq.NotifyOperationAutoPaused && op.DiedAgainPercent != nil:
			m.Text += fmt.Sprintf("\nMore than %g%% of the first %d replays to settle died again; nothing more is released until someone resumes or cancels it.",
				*op.DiedAgainPercent, dlq.GuardSample)
		case ev.Kind == dlq.NotifyOperationCanaryFailed:
			m.Text += "\nNothing else is released until someone releases it anyway or cancels it."
		case ev.Kind == dlq.NotifyOperationDone && op.StoppedFollowingBy != nil:
			m.Text += fmt.Sprintf("\n%s stopped following it before every replay had settled.", *op.StoppedFollowingBy)
		}
		if op.Reason != "" {
			m.Text += ": " + clip(op.Reason, 200)
		}
		if op.Error != nil && *op.Error != "" {
			m.Text += "\nError: " + clip(*op.Error, 300)
		}
	case dlq.NotifyPauseBegan, dlq.NotifyPauseExpired:
		id, err := strconv.ParseInt(ev.Subject, 10, 64)
		if err != nil {
			return Message{}, fmt.Errorf("event %d: pause id %q: %w", ev.ID, ev.Subject, err)
		}
		p, err := s.cfg.Store.PauseByID(ctx, id)
		if err != nil {
			return Message{}, err
		}
		if ev.Kind == dlq.NotifyPauseBegan {
			m.Title = fmt.Sprintf("Paused: %s, by %s", p.Target(), p.PausedBy)
			m.Text = "Why: " + clip(p.Reason, 300)
			if p.Until != nil {
				m.Text += "\nUntil " + p.Until.UTC().Format(time.RFC3339) + ", then it resumes by itself."
			} else {
				m.Text += "\nUntil someone resumes it."
			}
		} else {
			m.Title = fmt.Sprintf("Pause expired: %s runs again", p.Target())
			m.Text = fmt.Sprintf("Paused by %s since %s: %s", p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339), clip(p.Reason, 300))
		}
	default:
		m.Title = "Redrive: " + ev.Kind
	}
	return m, nil
}

// link makes an absolute console URL of path.
func (s *Sender) link(path string) string {
	return strings.TrimSuffix(s.cfg.PublicURL, "/") + path
}

// body is m as format's body.
func body(format Format, m Message) ([]byte, error) {
	if format == FormatSlack {
		text := "*" + slackEscape(m.Title) + "*\n" + slackEscape(m.Text)
		if m.URL != "" {
			text += "\n<" + m.URL + "|Open in Redrive>"
		}
		return json.Marshal(map[string]string{"text": text})
	}
	return json.Marshal(m)
}

// slackEscape escapes the three characters Slack's mrkdwn treats as
// control characters.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
