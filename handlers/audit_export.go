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
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
)

// AuditExporter is what the audit export needs: every entry of a filter,
// one at a time.
type AuditExporter interface {
	EachAuditEntry(ctx context.Context, f dlq.AuditFilter, fn func(dlq.AuditEntry) error) error
}

// auditColumns are the CSV header, in the order auditRecord writes them.
var auditColumns = []string{"id", "at", "actor", "action", "dead_letter_id", "operation_id", "filter", "max_id",
	"counts", "reason", "request_id", "remote_addr", "user_agent", "details", "prev_hash", "hash"}

// ExportAudit streams every entry a filter selects (its page and cursor
// aside) as CSV or a JSON array, newest first, batch by batch, as the
// dead-letter export does: constant memory, and an error mid-stream ends
// the body early (logged) rather than passing for a complete file.
func ExportAudit(store AuditExporter, logger *slog.Logger, now func() time.Time, format string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := dlq.ParseAuditFilter(c.QueryParams(), now())
		if err != nil {
			return err
		}
		name := "audit-" + now().UTC().Format("20060102T150405Z") + "." + format
		h := c.Response().Header()
		h.Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", name))
		h.Set("Cache-Control", "no-store")
		// write adds one entry; flush pushes what is buffered to the client;
		// end closes the document.
		var write func(dlq.AuditEntry) error
		var flush, end func() error
		if format == ExportCSV {
			h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
			c.Response().WriteHeader(http.StatusOK)
			w := csv.NewWriter(c.Response())
			err = w.Write(auditColumns)
			write = func(e dlq.AuditEntry) error { return w.Write(auditRecord(e)) }
			flush = func() error { w.Flush(); return w.Error() }
			end = flush
		} else {
			h.Set(echo.HeaderContentType, echo.MIMEApplicationJSONCharsetUTF8)
			c.Response().WriteHeader(http.StatusOK)
			n := 0
			_, err = io.WriteString(c.Response(), "[")
			write = func(e dlq.AuditEntry) error {
				b, err := json.Marshal(apiAuditEntry(e))
				if err != nil {
					return err
				}
				sep := ",\n"
				if n++; n == 1 {
					sep = "\n"
				}
				_, err = io.WriteString(c.Response(), sep+string(b))
				return err
			}
			flush = func() error { return nil }
			end = func() error { _, err := io.WriteString(c.Response(), "\n]\n"); return err }
		}
		rows := 0
		if err == nil {
			err = store.EachAuditEntry(c.Request().Context(), f, func(e dlq.AuditEntry) error {
				if err := write(e); err != nil {
					return err
				}
				if rows++; rows%flushEvery == 0 {
					if err := flush(); err != nil {
						return err
					}
					c.Response().Flush()
				}
				return nil
			})
		}
		if err == nil {
			err = end()
		}
		if err != nil {
			logger.Error("export audit", "err", err, "format", format, "rows_written", rows,
				"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
			return nil // the body is already on its way
		}
		c.Response().Flush()
		return nil
	}
}

// auditRecord is one CSV row; free text is defused against spreadsheet
// formulas (cell), as in the dead-letter export.
func auditRecord(e dlq.AuditEntry) []string {
	opt := func(n *int64) string {
		if n == nil {
			return ""
		}
		return strconv.FormatInt(*n, 10)
	}
	filter := ""
	if e.Filter != nil {
		filter = string(*e.Filter)
	}
	return []string{strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), cell(e.Actor), e.Action,
		opt(e.DeadLetterID), opt(e.OperationID), cell(filter), opt(e.MaxID), cell(string(e.Counts)), cell(e.Reason),
		cell(e.RequestID), cell(e.RemoteAddr), cell(e.UserAgent), cell(string(e.Details)), e.PrevHash, e.Hash}
}
