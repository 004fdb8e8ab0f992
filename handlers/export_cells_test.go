package handlers_test

import (
	"encoding/csv"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/store/storetest"
)

// formulaStart is what a spreadsheet reads as the start of a formula.
const formulaStart = "=+-@\t\r"

// checkNoCellIsAFormula fails for every cell of a CSV export, header and
// rows, that a spreadsheet would evaluate.
func checkNoCellIsAFormula(t *testing.T, body string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, body)
	}
	for i, r := range rows {
		for j, c := range r {
			if c != "" && strings.ContainsRune(formulaStart, rune(c[0])) {
				t.Errorf("row %d, column %q: %q would be evaluated as a formula", i, rows[0][j], c)
			}
		}
	}
	return rows
}

// Every cell of the dead-letter export goes through the formula guard,
// not only the free-text ones: task and queue names may start with a dash,
// and a fingerprint is whatever the writer stored.
func TestExportDeadLettersGuardsEveryCell(t *testing.T) {
	t.Parallel()
	s := newLetterServer(t)
	s.insert(t, storetest.Letter{Task: "-cmd", Queue: "-A1", Fingerprint: "@SUM(A1)", ErrorClass: "+RuntimeError", Message: "=1+1"})

	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/dead-letters/export.csv?status=all", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	rows := checkNoCellIsAFormula(t, rec.Body.String())
	if len(rows) != 2 || rows[1][2] != "'-cmd" || rows[1][3] != "'-A1" || rows[1][10] != "'@SUM(A1)" {
		t.Fatalf("want the letter's task, queue and fingerprint kept as text, got %q", rows)
	}
}

// The same holds for the audit export, whatever column a formula lands in.
func TestExportAuditGuardsEveryCell(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	if _, err := a.db.Exec(`INSERT INTO audit_events (at, actor, action, counts, details, prev_hash, hash)
		VALUES (now(), 'olga', '=cmd', '{}', '{}', '-prev', '+hash')`); err != nil {
		t.Fatal(err)
	}
	rec, _ := a.page(t, a.vic, "/audit/export.csv?actor=olga")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	rows := checkNoCellIsAFormula(t, rec.Body.String())
	if len(rows) < 2 || rows[1][3] != "'=cmd" || rows[1][15] != "'+hash" {
		t.Fatalf("want the crafted entry's action and hash kept as text, got %q", rows)
	}
}
