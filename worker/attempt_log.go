package worker

import (
	"context"
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
//
// A line is formatted only if it is kept: its record waits (at most
// maxPendingLines of them) until the attempt fails (close), and a success
// drops it unformatted (drop). Formatting was two thirds of what three
// lines cost an attempt (pprof of BenchmarkAttemptLines), and most
// attempts succeed. Only a record whose values cannot change meanwhile
// waits (strings, numbers, times, durations, booleans: deferrable); one
// with any other value (a map, a pointer, a LogValuer) is formatted as it
// is logged, so that what is kept is what was logged.
type attemptLines struct {
	mu      sync.Mutex
	buf     []byte
	pending []pendingLine
	// first holds the first few pending lines, in the allocation of the
	// attemptLines itself.
	first  [4]pendingLine
	closed bool
	// cutLines and cutBytes count the lines dropped past the bound. Once
	// one is dropped every later one is too, so what is kept is a prefix.
	cutLines, cutBytes int
}

// pendingLine is a record not yet formatted, with the handler that will
// format it (the attempt's TextHandler, holding the logger's attributes
// and groups as they were when the line was logged).
type pendingLine struct {
	format slog.Handler
	record slog.Record
}

// maxPendingLines bounds the records an attempt holds unformatted, so that
// a chatty task's memory is bounded by them and the kept bytes.
const maxPendingLines = 64

// add keeps r, formatted by format now or when the attempt's lines are
// kept. A line logged after the attempt ended is dropped.
func (b *attemptLines) add(format slog.Handler, r slog.Record) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if !deferrable(r) {
		b.formatPending()
		b.formatLine(format, r)
		return
	}
	if b.pending == nil {
		b.pending = b.first[:0]
	}
	b.pending = append(b.pending, pendingLine{format: format, record: r.Clone()})
	if len(b.pending) >= maxPendingLines {
		b.formatPending()
	}
}

// deferrable reports whether every value of r is immutable, so that
// formatting it later writes what formatting it now would.
func deferrable(r slog.Record) bool {
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		switch a.Value.Kind() {
		case slog.KindAny, slog.KindGroup, slog.KindLogValuer:
			ok = false
		}
		return ok
	})
	return ok
}

// formatPending formats the records held, in the order they were logged.
// The caller holds mu.
func (b *attemptLines) formatPending() {
	for _, p := range b.pending {
		b.formatLine(p.format, p.record)
	}
	clear(b.pending)
	b.pending = b.pending[:0]
}

// formatLine writes r through format into buf (Write). The caller holds
// mu. A TextHandler fails only when its writer does, and Write never
// fails.
func (b *attemptLines) formatLine(format slog.Handler, r slog.Record) {
	_ = format.Handle(context.Background(), r)
}

// Write keeps p, one formatted line, if it fits. It never fails: logging
// must not fail the task. Only formatLine writes, with mu held.
func (b *attemptLines) Write(p []byte) (int, error) {
	if b.cutLines > 0 || len(b.buf)+len(p) > dlq.MaxAttemptLogBytes {
		b.cutLines++
		b.cutBytes += len(p)
	} else {
		b.buf = append(b.buf, p...)
	}
	return len(p), nil
}

// close ends the attempt's lines and returns them, the cut said at the end,
// as text Postgres stores. Lines written later are dropped.
func (b *attemptLines) close() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.formatPending()
	b.closed = true
	s := string(b.buf)
	b.buf, b.pending = nil, nil
	if b.cutLines > 0 {
		s += dlq.LogsCutNote(b.cutLines, b.cutBytes) + "\n"
	}
	return dlq.MakeStorable(s)
}

// drop ends the attempt's lines without keeping them, or formatting those
// still waiting.
func (b *attemptLines) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed, b.buf, b.pending = true, nil, nil
}

// keepingHandler sends each record both to the attempt's lines (keep, at
// keptLogLevel and above) and to the worker's own logger (next), so that
// what a task logs reaches stdout as before and is also kept with the
// attempt.
type keepingHandler struct {
	lines *attemptLines
	keep  slog.Handler // formats a kept line into lines
	next  slog.Handler
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
	return keepingHandler{lines: lines, keep: keep, next: next}
}

func (h keepingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= keptLogLevel || h.next.Enabled(ctx, l)
}

func (h keepingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= keptLogLevel {
		h.lines.add(h.keep, r)
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h keepingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return keepingHandler{lines: h.lines, keep: h.keep.WithAttrs(as), next: h.next.WithAttrs(as)}
}

func (h keepingHandler) WithGroup(name string) slog.Handler {
	return keepingHandler{lines: h.lines, keep: h.keep.WithGroup(name), next: h.next.WithGroup(name)}
}
