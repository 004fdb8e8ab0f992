package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/redrive/redrive/dlq"
)

// keptLogLevel is the least level kept with the attempt (at most
// dlq.MaxAttemptLogBytes of lines): Debug lines go only to the worker's
// own logger (when its level lets them), so that a chatty loop does not
// spend the attempt's 64 KiB on them.
const keptLogLevel = slog.LevelInfo

// attemptLines holds the lines logged during one attempt, formatted as
// logfmt by a slog.TextHandler writing into it (one Write per line). It
// belongs to the attempt's context: once the attempt has ended (close), a
// line logged by a goroutine the task left behind is dropped here (it
// still reaches the worker's own logger), and never reaches the next
// attempt, which has a buffer of its own.
type attemptLines struct {
	mu     sync.Mutex
	buf    []byte
	closed bool
	// cutLines and cutBytes count the lines dropped past the bound. Once
	// one is dropped every later one is too, so what is kept is a prefix.
	cutLines, cutBytes int
}

// Write keeps p, one formatted line, if it fits and the attempt is still
// running. It never fails: logging must not fail the task.
func (b *attemptLines) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
	case b.cutLines > 0 || len(b.buf)+len(p) > dlq.MaxAttemptLogBytes:
		b.cutLines++
		b.cutBytes += len(p)
	default:
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

// close ends the attempt's lines and returns them, the cut said at the end,
// as text Postgres stores. Lines written later are dropped.
func (b *attemptLines) close() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	s := string(b.buf)
	b.buf = nil
	if b.cutLines > 0 {
		s += dlq.LogsCutNote(b.cutLines, b.cutBytes) + "\n"
	}
	return dlq.MakeStorable(s)
}

// drop ends the attempt's lines without keeping them.
func (b *attemptLines) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.buf = true, nil
}

// keepingHandler sends each record both to the attempt's lines (keep, at
// keptLogLevel and above) and to the worker's own logger (next), so that
// what a task logs reaches stdout as before and is also kept with the
// attempt.
type keepingHandler struct {
	keep slog.Handler
	next slog.Handler
}

func newKeepingHandler(lines *attemptLines, next slog.Handler) keepingHandler {
	keep := slog.NewTextHandler(lines, &slog.HandlerOptions{
		Level: keptLogLevel,
		// The attempt says its day; the time of day to the millisecond is
		// what reading the lines beside one another needs.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey && a.Value.Kind() == slog.KindTime {
				return slog.String(slog.TimeKey, a.Value.Time().UTC().Format("15:04:05.000"))
			}
			return a
		},
	})
	return keepingHandler{keep: keep, next: next}
}

func (h keepingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= keptLogLevel || h.next.Enabled(ctx, l)
}

func (h keepingHandler) Handle(ctx context.Context, r slog.Record) error {
	var errKeep, errNext error
	if r.Level >= keptLogLevel {
		errKeep = h.keep.Handle(ctx, r)
	}
	if h.next.Enabled(ctx, r.Level) {
		errNext = h.next.Handle(ctx, r)
	}
	return errors.Join(errKeep, errNext)
}

func (h keepingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return keepingHandler{keep: h.keep.WithAttrs(as), next: h.next.WithAttrs(as)}
}

func (h keepingHandler) WithGroup(name string) slog.Handler {
	return keepingHandler{keep: h.keep.WithGroup(name), next: h.next.WithGroup(name)}
}
