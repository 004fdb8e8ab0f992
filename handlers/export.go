package handlers

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// DeadLetterExporter is what an export needs from the store: every letter
// of a filter, one at a time.
type DeadLetterExporter interface {
	EachDeadLetter(ctx context.Context, f dlq.Filter, fn func(dlq.DeadLetter) error) error
}

// Export formats.
const (
	ExportCSV  = "csv"
	ExportJSON = "json"
)

// flushEvery is how many rows go out between flushes: the client sees
// progress, and the server holds at most this much unsent.
const flushEvery = 500

// ExportDeadLetters streams every letter a filter selects (its page and
// cursor aside) as CSV or as a JSON array; see streamExport.
func ExportDeadLetters(store DeadLetterExporter, logger *slog.Logger, now func() time.Time, format string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := ParseFilter(c.QueryParams(), now())
		if err != nil {
			return err
		}
		return streamExport(c, logger, export[dlq.DeadLetter]{
			name: "dead-letters", format: format, now: now(), columns: exportColumns, record: csvLetter,
			item: func(d dlq.DeadLetter) any { return apiLetter(d) },
			each: func(ctx context.Context, fn func(dlq.DeadLetter) error) error {
				return store.EachDeadLetter(ctx, f, fn)
			},
		})
	}
}

// export describes one streamed export of items of type T.
type export[T any] struct {
	name    string // file name prefix and log label
	format  string // ExportCSV or ExportJSON
	now     time.Time
	columns []string         // CSV header
	record  func(T) []string // one CSV row, in columns' order
	item    func(T) any      // one JSON array element
	each    func(ctx context.Context, fn func(T) error) error
}

// streamExport writes the items as the store reads them, batch by batch, so
// 100,000 rows never sit in memory. Once the first byte is out the status
// cannot change, so an error mid-stream is logged here and the connection
// is aborted (http.ErrAbortHandler) before the body's final chunk: the
// client sees a failed download. Ending the body normally would hand over a
// CSV cut at a row boundary that passes for a complete export.
func streamExport[T any](c echo.Context, logger *slog.Logger, e export[T]) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q",
		e.name+"-"+e.now.UTC().Format("20060102T150405Z")+"."+e.format))
	h.Set("Cache-Control", "no-store")
	var w rowWriter[T]
	if e.format == ExportCSV {
		h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
		w = &csvRows[T]{w: csv.NewWriter(c.Response()), columns: e.columns, record: e.record}
	} else {
		h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON) // JSON is UTF-8 by definition (RFC 8259)
		w = &jsonRows[T]{w: c.Response(), item: e.item}
	}
	c.Response().WriteHeader(http.StatusOK)
	n := 0
	err := w.begin()
	if err == nil {
		err = e.each(c.Request().Context(), func(v T) error {
			if err := w.row(v); err != nil {
				return err
			}
			if n++; n%flushEvery == 0 {
				if err := w.flush(); err != nil {
					return err
				}
				c.Response().Flush()
			}
			return nil
		})
	}
	if err == nil {
		err = w.end()
	}
	if err != nil {
		logger.Error("export "+e.name+" failed part way; aborting the response", "err", err, "format", e.format,
			"rows_written", n, "request_id", c.Response().Header().Get(echo.HeaderXRequestID))
		panic(http.ErrAbortHandler) // net/http closes the connection without ending the body
	}
	c.Response().Flush()
	return nil
}

type rowWriter[T any] interface {
	begin() error
	row(T) error
	flush() error
	end() error
}

// exportColumns are the CSV header; csvLetter writes them in this order.
var exportColumns = []string{"id", "job_id", "task", "queue", "status", "reason", "error_class", "error",
	"attempts", "max_attempts", "fingerprint", "enqueued_at", "failed_at", "replay_of", "replayed_at",
	"replay_job_id", "discarded_at", "args", "kwargs"}

func csvLetter(d dlq.DeadLetter) []string {
	return []string{
		strconv.FormatInt(d.ID, 10), strconv.FormatInt(d.JobID, 10), d.Task, d.Queue, string(d.Status), string(d.Reason),
		cell(d.ErrorClass), cell(d.ErrorMessage), strconv.Itoa(d.Attempts), strconv.Itoa(d.MaxAttempts), d.Fingerprint,
		csvTime(&d.EnqueuedAt), csvTime(&d.FailedAt), csvInt(d.ReplayOf), csvTime(d.ReplayedAt), csvInt(d.ReplayJobID),
		csvTime(d.DiscardedAt), cell(string(d.Args)), cell(string(d.Kwargs)),
	}
}

type csvRows[T any] struct {
	w       *csv.Writer
	columns []string
	record  func(T) []string
}

func (r *csvRows[T]) begin() error { return r.w.Write(guardCells(r.columns)) }

func (r *csvRows[T]) row(v T) error { return r.w.Write(guardCells(r.record(v))) }

// guardCells passes every cell of a CSV row through cell, whatever its
// column: names of tasks and queues may start with a dash, and a record
// function that forgets a column must not reopen the hole. It writes a new
// slice: the header is shared by every request.
func guardCells(rec []string) []string {
	out := make([]string, len(rec))
	for i, s := range rec {
		out[i] = cell(s)
	}
	return out
}

func (r *csvRows[T]) flush() error {
	r.w.Flush()
	return r.w.Error()
}

func (r *csvRows[T]) end() error { return r.flush() }

// cell defuses spreadsheet formulas: a cell starting with = + - @ or a tab
// would be evaluated by Excel or Sheets when the file is opened, and error
// messages are attacker-influenced text. A leading apostrophe keeps it text.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func csvTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func csvInt(n *int64) string {
	if n == nil {
		return ""
	}
	return strconv.FormatInt(*n, 10)
}

// jsonRows writes a JSON array one element at a time.
type jsonRows[T any] struct {
	w     io.Writer
	item  func(T) any
	count int
}

func (r *jsonRows[T]) begin() error {
	_, err := io.WriteString(r.w, "[")
	return err
}

func (r *jsonRows[T]) row(v T) error {
	b, err := json.Marshal(r.item(v))
	if err != nil {
		return err
	}
	sep := ",\n"
	if r.count == 0 {
		sep = "\n"
	}
	r.count++
	if _, err := io.WriteString(r.w, sep); err != nil {
		return err
	}
	_, err = r.w.Write(b)
	return err
}

func (r *jsonRows[T]) flush() error { return nil }

func (r *jsonRows[T]) end() error {
	_, err := io.WriteString(r.w, "\n]\n")
	return err
}
