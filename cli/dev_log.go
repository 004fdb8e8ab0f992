package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// devLogFile, in --data-dir, holds every log line of the running dev: the
// terminal leaves out one kind (devLogHandler).
const devLogFile = "dev.log"

// devSummaryEvery is how often dev's terminal counts the jobs dead-lettered
// since the last count.
const devSummaryEvery = time.Minute

// deadLetteredMsg is the message the worker logs for each job it
// dead-letters (worker/completer.go). The demo traffic dead-letters several
// a minute, so on the terminal these lines would push the banner with its
// sign-in out of sight within a minute; dev counts them instead.
const deadLetteredMsg = "job dead-lettered"

// devLog is dev's logging: every record to a file in the data folder, and
// all but the dead-lettered lines to the terminal, which get a count a
// minute instead (summarise). The worker logs as it does in production;
// only where its lines go differs.
type devLog struct {
	path    string
	file    *os.File
	handler devLogHandler
}

// openDevLog creates dataDir if need be and starts dataDir/dev.log afresh,
// so the file holds this run only and does not grow from run to run.
func openDevLog(f flags, dataDir string, terminal io.Writer) (*devLog, error) {
	// 0755 like localpg's folders: when the cluster lives in dataDir, the
	// user postgres runs as must be able to enter it.
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("dev log: %w", err)
	}
	path := filepath.Join(dataDir, devLogFile)
	// 0600: the lines quote job errors, which may hold what a job carried.
	file, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dev log: %w", err)
	}
	toFile, err := newLogger(f, file)
	if err != nil {
		return nil, errors.Join(err, file.Close())
	}
	toTerminal, err := newLogger(f, terminal)
	if err != nil {
		return nil, errors.Join(err, file.Close())
	}
	return &devLog{path: path, file: file,
		handler: devLogHandler{file: toFile.Handler(), terminal: toTerminal.Handler(), letters: new(atomic.Int64)}}, nil
}

// Logger is the logger every part of dev logs to.
func (l *devLog) Logger() *slog.Logger { return slog.New(l.handler) }

// Close closes the log file.
func (l *devLog) Close() error { return l.file.Close() }

// summarise prints, every interval in which jobs were dead-lettered, one
// line that counts them and ends with hint (where to look at them), until
// ctx ends. A quiet interval prints nothing.
func (l *devLog) summarise(ctx context.Context, w io.Writer, every time.Duration, hint string) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var total int64
	for {
		select {
		case <-ctx.Done():
			return
		case t := <-tick.C:
			n := l.handler.letters.Swap(0)
			if n == 0 {
				continue
			}
			total += n
			fmt.Fprintf(w, "%s %s dead-lettered since the last count, %d since start; %s\n",
				t.Format("15:04"), plural(n, "job", "jobs"), total, hint)
		}
	}
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// devLogHandler sends each record to the file and, unless it is a
// dead-lettered line, to the terminal; those it counts in letters, which
// the handlers that With makes share.
type devLogHandler struct {
	file, terminal slog.Handler
	letters        *atomic.Int64
}

// Enabled implements slog.Handler.
func (h devLogHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.file.Enabled(ctx, level) || h.terminal.Enabled(ctx, level)
}

// Handle implements slog.Handler.
func (h devLogHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.file.Enabled(ctx, r.Level) {
		err = h.file.Handle(ctx, r)
	}
	if r.Message == deadLetteredMsg {
		h.letters.Add(1)
		return err
	}
	if h.terminal.Enabled(ctx, r.Level) {
		err = errors.Join(err, h.terminal.Handle(ctx, r))
	}
	return err
}

// WithAttrs implements slog.Handler.
func (h devLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return devLogHandler{file: h.file.WithAttrs(attrs), terminal: h.terminal.WithAttrs(attrs), letters: h.letters}
}

// WithGroup implements slog.Handler.
func (h devLogHandler) WithGroup(name string) slog.Handler {
	return devLogHandler{file: h.file.WithGroup(name), terminal: h.terminal.WithGroup(name), letters: h.letters}
}
