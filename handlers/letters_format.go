package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// Pure helpers that turn letters into words for the pages. Kept apart from
// the handlers so tests can table-drive them.

// firstLine returns s's first line, cut to at most n runes with an ellipsis.
func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return clip(s[:i], n) + " …"
	}
	return clip(s, n)
}

// clip cuts s to at most n runes, marking the cut with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// why says in words why a letter is dead.
func why(d dlq.DeadLetter) string {
	switch d.Reason {
	case dlq.ReasonExhausted:
		return fmt.Sprintf("Exhausted %d/%d attempts: every try failed with a transient error.", d.Attempts, d.MaxAttempts)
	case dlq.ReasonPermanent:
		return fmt.Sprintf("Permanent error at attempt %d: the handler said retrying cannot help.", d.Attempts)
	case dlq.ReasonLeaseExpired:
		return fmt.Sprintf("Lease expired: the worker vanished on attempt %d/%d (a crash or an OOM kill), so the job is presumed to kill its worker.", d.Attempts, d.MaxAttempts)
	case dlq.ReasonKilled:
		return fmt.Sprintf("Killed by an operator after %d/%d attempts, before it could run again; the history's last entry says who and why.", d.Attempts, d.MaxAttempts)
	case dlq.ReasonCancelled:
		return fmt.Sprintf("Cancelled by an operator while attempt %d/%d ran; the history's last entry says who and why.", d.Attempts, d.MaxAttempts)
	default:
		return string(d.Reason)
	}
}

// humanDuration formats a duration the way a person reads a timeline:
// "120 ms", "2.3 s", "4 min 10 s", "2 h 5 min".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		s := fmt.Sprintf("%.1f s", d.Seconds())
		return strings.Replace(s, ".0 s", " s", 1)
	case d < time.Hour:
		m := d / time.Minute
		s := (d % time.Minute) / time.Second
		if s == 0 {
			return fmt.Sprintf("%d min", m)
		}
		return fmt.Sprintf("%d min %d s", m, s)
	default:
		h := d / time.Hour
		m := (d % time.Hour) / time.Minute
		if m == 0 {
			return fmt.Sprintf("%d h", h)
		}
		return fmt.Sprintf("%d h %d min", h, m)
	}
}

// outcomeText says what an attempt's outcome meant, on the job page and on
// the dead letter's attempts alike (an attempt with no outcome recorded
// reads as failed, as the job page always said).
func outcomeText(o dlq.Outcome) string {
	switch o {
	case dlq.OutcomeRetry:
		return "failed, retried"
	case dlq.OutcomeDead:
		return "failed, dead-lettered"
	case dlq.OutcomeLeaseExpired:
		return "worker vanished (lease expired)"
	case dlq.OutcomeInterrupted:
		return "interrupted by shutdown (not counted)"
	case dlq.OutcomeKilled:
		return "killed by an operator"
	case dlq.OutcomeCancelled:
		return "cancelled by an operator"
	case dlq.OutcomeLost:
		return "ran, but its outcome could not be recorded (counted)"
	case "":
		return "failed"
	default:
		return string(o)
	}
}

// payloadCap is the most bytes of args or kwargs a page shows.
const payloadCap = 256 << 10

// prettyJSON indents a JSON payload for reading. A payload too large to
// show whole is cut, with a note saying so.
func prettyJSON(raw json.RawMessage) (body, note string) {
	if len(raw) > payloadCap {
		return string(raw[:payloadCap]), fmt.Sprintf("Shown: the first %s of %s, unindented. The API has the whole payload.",
			bytesText(payloadCap), bytesText(len(raw)))
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw), ""
	}
	return buf.String(), ""
}

func bytesText(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// tracebackHeadLines is how many lines of a traceback show before "show all".
const tracebackHeadLines = 40

// splitTraceback returns the first lines and the rest of a traceback, and
// its line count.
func splitTraceback(tb string) (head, rest string, lines int) {
	tb = strings.TrimRight(tb, "\n")
	if tb == "" {
		return "", "", 0
	}
	lines = strings.Count(tb, "\n") + 1
	if lines <= tracebackHeadLines+5 { // not worth hiding five lines
		return tb, "", lines
	}
	i := 0
	for n := 0; n < tracebackHeadLines; n++ {
		i += strings.IndexByte(tb[i:], '\n') + 1
	}
	return tb[:i-1], tb[i:], lines
}

// logsURL fills a logs/traces URL template for one attempt: {job_id},
// {task}, and {from}/{to}, an RFC3339 window from a minute before the
// attempt started to a minute after it ended. Every value is URL-escaped.
// An empty template means no link.
func logsURL(tmpl string, jobID int64, task string, a dlq.Attempt) string {
	if tmpl == "" || a.At.IsZero() {
		return ""
	}
	from := a.At.Add(-time.Duration(a.DurationMS)*time.Millisecond - time.Minute).UTC()
	to := a.At.Add(time.Minute).UTC()
	return strings.NewReplacer(
		"{job_id}", url.QueryEscape(fmt.Sprint(jobID)),
		"{task}", url.QueryEscape(task),
		"{from}", url.QueryEscape(from.Format(time.RFC3339)),
		"{to}", url.QueryEscape(to.Format(time.RFC3339)),
	).Replace(tmpl)
}

// openLogLines is the most lines of an attempt's logs shown open: longer
// logs start collapsed, so that a page of attempts stays a timeline.
const openLogLines = 12

// attemptLogs is an attempt's logged lines (masked already) for display.
func attemptLogs(logs string) views.AttemptLogs {
	lines := strings.Count(logs, "\n")
	if logs != "" && !strings.HasSuffix(logs, "\n") {
		lines++
	}
	cut := dlq.LogsWereCut(logs)
	if cut {
		lines-- // the note is no line the task logged
	}
	return views.AttemptLogs{Text: logs, Lines: lines, Cut: cut, Open: lines <= openLogLines}
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
