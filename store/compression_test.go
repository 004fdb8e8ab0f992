package store_test

import (
	"slices"
	"testing"

	"github.com/redrive/redrive/store/storetest"
)

// TestLargeValuesCompressWithLZ4: the schema has the server compress a
// letter's and a job's large values with lz4 rather than pglz, when it was
// built with lz4; and a letter written since reads back whole.
func TestLargeValuesCompressWithLZ4(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var lz4 bool
	if err := db.Get(&lz4, `SELECT 'lz4' = ANY (enumvals) FROM pg_settings WHERE name = 'default_toast_compression'`); err != nil {
		t.Fatal(err)
	}
	if !lz4 {
		t.Skip("this server was built without lz4: the migration keeps pglz")
	}
	var cols []string
	if err := db.Select(&cols, `SELECT attrelid::regclass || '.' || attname FROM pg_attribute
		WHERE attrelid IN ('dead_letter_records'::regclass, 'jobs'::regclass) AND attcompression = 'l' ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	// The letters' facts live in dead_letter_records (00101_letters.sql).
	want := []string{"dead_letter_records.args", "dead_letter_records.error_message", "dead_letter_records.history",
		"dead_letter_records.kwargs", "dead_letter_records.traceback", "jobs.args", "jobs.errors", "jobs.kwargs"}
	if !slices.Equal(cols, want) {
		t.Fatalf("lz4 columns = %v, want %v", cols, want)
	}

	// A traceback long enough to be compressed is stored as lz4 and reads
	// back as written.
	id := insertLetters(t, db, 1)[0]
	if _, err := db.Exec(`UPDATE dead_letter_records SET traceback = repeat('File "app.py", line 12, in charge' || chr(10), 400) WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	var method string
	var length int
	if err := db.QueryRow(`SELECT pg_column_compression(traceback), length(traceback) FROM dead_letter_records WHERE id = $1`, id).Scan(&method, &length); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" || length != 400*len("File \"app.py\", line 12, in charge\n") {
		t.Fatalf("traceback stored as %q, %d characters; want lz4 and all of it", method, length)
	}
}
