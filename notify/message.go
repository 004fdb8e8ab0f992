package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
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
	// Links are Text's lines, each with the page it is about (a digest of
	// new groups); a Slack body shows them as links in place of Text.
	Links []Link `json:"links,omitempty"`
}

// Link is one line of a message that links to a console page.
type Link struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// A digest's message lists its first digestListed groups, each linked to
// its page; the rest are counted, with a link to the groups page, newest
// first. Its JSON facts name its first digestFacts groups, enough for a
// receiver to act on an outage without a body that grows with it.
const (
	digestListed = 10
	digestFacts  = 100
	newestGroups = "/groups?sort=newest"
)

// digestKind is the event a digest's message says it is: a digest of one
// group is that group's own message.
func digestKind(g dlq.NewGroupDigest) string {
	if len(g.Events) == 1 {
		return dlq.NotifyGroupNew
	}
	return dlq.NotifyGroupNewDigest
}

// composeDigest turns a digest of new groups into its message: one group's
// is the message of its event, as compose makes it; several are listed,
// with what each group holds now. Its id is the digest's, the same at
// every attempt.
func (s *Sender) composeDigest(ctx context.Context, g dlq.NewGroupDigest) (Message, error) {
	if len(g.Events) == 0 {
		return Message{}, fmt.Errorf("digest %d: no groups", g.ID)
	}
	if digestKind(g) == dlq.NotifyGroupNew {
		return s.compose(ctx, g.Events[0])
	}
	first, last := g.Events[0], g.Events[len(g.Events)-1]
	m := Message{ID: g.ID, Event: dlq.NotifyGroupNewDigest, At: last.At.UTC(), URL: s.link(newestGroups),
		Title: fmt.Sprintf("%d new error groups in the last %s", len(g.Events), lastSpan(time.Since(first.At)))}
	inc, isIncident, err := s.digestIncident(ctx, g)
	if err != nil {
		return Message{}, err
	}
	if isIncident {
		// One failure in several tasks (an outage): named as the incident,
		// linked to its page, where one replay takes all its groups.
		m.Title = fmt.Sprintf("New incident: %s in %s (%d new error groups in the last %s)", inc.ErrorClass,
			strings.Join(inc.Tasks(), ", "), len(g.Events), lastSpan(time.Since(first.At)))
		m.URL = s.link("/incidents/" + url.PathEscape(inc.ID))
	}
	type groupFacts struct {
		Fingerprint string `json:"fingerprint"`
		Task        string `json:"task"`
		ErrorClass  string `json:"error_class"`
		EventID     int64  `json:"event_id"`
	}
	facts := struct {
		Count int `json:"count"`
		// Incident is the incident the groups are all of, "" when none.
		Incident string       `json:"incident,omitempty"`
		Groups   []groupFacts `json:"groups"`
	}{Count: len(g.Events)}
	if isIncident {
		facts.Incident = inc.ID
	}
	var lines []string
	for i, ev := range g.Events {
		f := groupFacts{Fingerprint: ev.Subject, EventID: ev.ID}
		_ = json.Unmarshal(ev.Facts, &f) // facts are ours; an unexpected shape leaves them empty
		if i < digestFacts {
			facts.Groups = append(facts.Groups, f)
		}
		if i >= digestListed {
			continue
		}
		// The group as it is now, as compose reads it for one group.
		grp, err := s.cfg.Groups.Group(ctx, ev.Subject)
		if err != nil && !errors.Is(err, dlq.ErrNotFound) {
			return Message{}, err
		}
		line := f.Task + " " + f.ErrorClass + " (no letters left)"
		if err == nil {
			line = fmt.Sprintf("%s %s (%d pending)", grp.Task, grp.ErrorClass, grp.Pending)
		}
		lines = append(lines, line)
		m.Links = append(m.Links, Link{Text: line, URL: s.link(ev.ConsolePath())})
	}
	if more := len(g.Events) - digestListed; more > 0 {
		line := fmt.Sprintf("and %d more", more)
		lines = append(lines, line)
		m.Links = append(m.Links, Link{Text: line, URL: s.link(newestGroups)})
	}
	m.Text = strings.Join(lines, "\n")
	b, err := json.Marshal(facts)
	if err != nil {
		return Message{}, fmt.Errorf("digest %d: facts: %w", g.ID, err)
	}
	m.Facts = b
	return m, nil
}

// digestIncident is the incident every group of the digest is one of:
// the same failure in several tasks, announced as one. False when the
// groups are not all of one incident.
func (s *Sender) digestIncident(ctx context.Context, g dlq.NewGroupDigest) (dlq.Incident, bool, error) {
	inc, ok, err := s.cfg.Groups.IncidentOf(ctx, g.Events[0].Subject)
	if err != nil || !ok {
		return dlq.Incident{}, false, err
	}
	ids := inc.GroupIDs()
	for _, ev := range g.Events {
		if _, found := slices.BinarySearch(ids, ev.Subject); !found {
			return dlq.Incident{}, false, nil
		}
	}
	return inc, true, nil
}

// lastSpan says how long d is in "in the last …", rounded up: minute,
// N minutes, N hours.
func lastSpan(d time.Duration) string {
	switch {
	case d <= time.Minute:
		return "minute"
	case d < 2*time.Hour:
		return strconv.Itoa(int((d+time.Minute-1)/time.Minute)) + " minutes"
	}
	return strconv.Itoa(int((d+time.Hour-1)/time.Hour)) + " hours"
}

// compose turns an event into its message, reading what it is about as it
// is now (a group's counts, an operation's progress), masked.
func (s *Sender) compose(ctx context.Context, ev dlq.NotificationEvent) (Message, error) {
	m := Message{ID: ev.ID, Event: ev.Kind, At: ev.At.UTC(), Facts: ev.Facts, URL: s.link(ev.ConsolePath())}
	var err error
	switch ev.Kind {
	case dlq.NotifyGroupNew, dlq.NotifyGroupSpike:
		err = s.composeGroup(ctx, ev, &m)
	case dlq.NotifyOperationDone, dlq.NotifyOperationFailed, dlq.NotifyOperationCancelled,
		dlq.NotifyOperationAutoPaused, dlq.NotifyOperationCanaryFailed:
		err = s.composeOperation(ctx, ev, &m)
	case dlq.NotifyPauseBegan, dlq.NotifyPauseExpired:
		err = s.composePause(ctx, ev, &m)
	default:
		m.Title = "Redrive: " + ev.Kind
	}
	if err != nil {
		return Message{}, err
	}
	return m, nil
}

// composeGroup writes m for a new or spiking group: the group as it is
// now, its sample masked as the console masks it.
func (s *Sender) composeGroup(ctx context.Context, ev dlq.NotificationEvent, m *Message) error {
	var facts struct {
		Task          string `json:"task"`
		ErrorClass    string `json:"error_class"`
		Count         int    `json:"count"`
		AtLeast       bool   `json:"at_least"`
		WindowSeconds int    `json:"window_seconds"`
	}
	_ = json.Unmarshal(ev.Facts, &facts) // facts are ours; an unexpected shape leaves them empty
	g, err := s.cfg.Groups.Group(ctx, ev.Subject)
	if err != nil && !errors.Is(err, dlq.ErrNotFound) {
		return err
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
	if err != nil {
		m.Text = "The group has no letters left."
		return nil
	}
	sample := s.cfg.Masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
	m.Text = fmt.Sprintf("%s\n%d pending of %d, first seen %s, last seen %s", clip(sample, 300), g.Pending, g.Total,
		g.FirstSeen.UTC().Format(time.RFC3339), g.LastSeen.UTC().Format(time.RFC3339))
	return nil
}

// operationVerbs say how each kind of operation event ended.
var operationVerbs = map[string]string{dlq.NotifyOperationDone: "finished", dlq.NotifyOperationFailed: "failed",
	dlq.NotifyOperationCancelled:    "was cancelled",
	dlq.NotifyOperationAutoPaused:   "auto-paused: too many replays died again",
	dlq.NotifyOperationCanaryFailed: "waits: its canary died again"}

// composeOperation writes m for a bulk operation that ended or waits.
func (s *Sender) composeOperation(ctx context.Context, ev dlq.NotificationEvent, m *Message) error {
	id, err := strconv.ParseInt(ev.Subject, 10, 64)
	if err != nil {
		return fmt.Errorf("event %d: operation id %q: %w", ev.ID, ev.Subject, err)
	}
	op, err := s.cfg.Operations.Operation(ctx, id)
	if err != nil {
		return err
	}
	m.Title = fmt.Sprintf("Bulk %s #%d %s", op.Kind, op.ID, operationVerbs[ev.Kind])
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
	return nil
}

// composePause writes m for a pause that began or expired by itself.
func (s *Sender) composePause(ctx context.Context, ev dlq.NotificationEvent, m *Message) error {
	id, err := strconv.ParseInt(ev.Subject, 10, 64)
	if err != nil {
		return fmt.Errorf("event %d: pause id %q: %w", ev.ID, ev.Subject, err)
	}
	p, err := s.cfg.Pauses.PauseByID(ctx, id)
	if err != nil {
		return err
	}
	if ev.Kind == dlq.NotifyPauseExpired {
		m.Title = fmt.Sprintf("Pause expired: %s runs again", p.Target())
		m.Text = fmt.Sprintf("Paused by %s since %s: %s", p.PausedBy, p.PausedAt.UTC().Format(time.RFC3339), clip(p.Reason, 300))
		return nil
	}
	m.Title = fmt.Sprintf("Paused: %s, by %s", p.Target(), p.PausedBy)
	m.Text = "Why: " + clip(p.Reason, 300)
	if p.Until != nil {
		m.Text += "\nUntil " + p.Until.UTC().Format(time.RFC3339) + ", then it resumes by itself."
	} else {
		m.Text += "\nUntil someone resumes it."
	}
	return nil
}

// link makes an absolute console URL of path.
func (s *Sender) link(path string) string {
	return strings.TrimSuffix(s.cfg.PublicURL, "/") + path
}

// body is m as format's body.
func body(format Format, m Message) ([]byte, error) {
	if format == FormatSlack {
		text := "*" + slackEscape(m.Title) + "*\n" + slackEscape(m.Text)
		if len(m.Links) > 0 {
			lines := make([]string, len(m.Links))
			for i, l := range m.Links {
				lines[i] = "• <" + l.URL + "|" + slackEscape(l.Text) + ">"
			}
			text = "*" + slackEscape(m.Title) + "*\n" + strings.Join(lines, "\n")
		}
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
