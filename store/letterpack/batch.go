package letterpack

import (
	"encoding/hex"
	"fmt"
)

// Batch gathers the templates of the letters one statement (or one
// transaction) writes, each once. The zero Batch is ready to use.
type Batch struct {
	// Hashes and Templates are the batch's distinct templates, the hashes
	// in hex (InsertTemplatesSQL's parameters).
	Hashes, Templates []string
	seen              map[string]bool
}

// Add packs one letter's traceback. It returns what the letter stores in
// its traceback column (its values, or the whole traceback when Pack keeps
// it whole) and its template's hash in hex ("" for a whole one: HashSQL's
// column).
func (b *Batch) Add(traceback, message string) (stored, hash string) {
	p, ok := Pack(traceback, message)
	if !ok {
		return traceback, ""
	}
	h := hex.EncodeToString(p.Hash)
	if !b.seen[h] {
		if b.seen == nil {
			b.seen = map[string]bool{}
		}
		b.seen[h] = true
		b.Hashes, b.Templates = append(b.Hashes, h), append(b.Templates, p.Template)
	}
	return p.Values, h
}

// InsertTemplatesSQL stores the templates whose hex hashes and texts are
// the text[] parameters hashes and templates, each once: a template
// already there is left as it is (two writers of a new template insert the
// same row, and the second finds the first's). A statement that writes
// letters runs it as a CTE, so that its letters and their templates are
// written together.
func InsertTemplatesSQL(hashes, templates string) string {
	return fmt.Sprintf(`INSERT INTO traceback_templates (hash, template)
	SELECT decode(x.h, 'hex'), x.t FROM unnest(%s::text[], %s::text[]) AS x(h, t)
	ON CONFLICT (hash) DO NOTHING`, hashes, templates)
}

// HashSQL turns column, a letter's template hash in hex, into the value of
// dead_letter_records.traceback_template (NULL for a traceback stored
// whole).
func HashSQL(column string) string {
	return "decode(nullif(" + column + ", ''), 'hex')"
}

// TracebackSQL reads the whole traceback of the letter row named by
// table (an alias of dead_letter_records), for SQL that reads a few.
func TracebackSQL(table string) string {
	return fmt.Sprintf("dead_letter_traceback(%[1]s.traceback_template, %[1]s.traceback, %[1]s.error_message)", table)
}

// SameTracebackSQL is a key that two letter rows of table share only if
// their whole tracebacks are equal, read without putting them together.
func SameTracebackSQL(table string) string {
	return fmt.Sprintf("md5(coalesce(%[1]s.traceback_template::text, '') || E'\\x03' || %[1]s.traceback || E'\\x03' || "+
		"CASE WHEN %[1]s.traceback_template IS NULL THEN '' ELSE %[1]s.error_message END)", table)
}
