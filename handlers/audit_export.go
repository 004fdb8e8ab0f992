package handlers

import (
	"context"
	"log/slog"
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
// aside) as CSV or a JSON array, newest first, as the dead-letter export
// does (streamExport).
func ExportAudit(store AuditExporter, logger *slog.Logger, now func() time.Time, format string) echo.HandlerFunc {
	return func(c echo.Context) error {
		f, err := ParseAuditFilter(c.QueryParams(), now())
		if err != nil {
			return err
		}
		return streamExport(c, logger, export[dlq.AuditEntry]{
			name: "audit", format: format, now: now(), columns: auditColumns, record: auditRecord,
			item: func(e dlq.AuditEntry) any { return apiAuditEntry(e) },
			each: func(ctx context.Context, fn func(dlq.AuditEntry) error) error {
				return store.EachAuditEntry(ctx, f, fn)
			},
		})
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
