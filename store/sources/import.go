package sources

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// An importing source (River) is read by Redrive rather than sending its
// letters: an importer reads its queue from a cursor kept on the source's
// row, and each batch it takes in moves the cursor in the same
// transaction, so that a crash between the two neither skips a letter nor
// makes one twice.

// ImportCursor returns where the importer of source left off: "" before
// its first import.
func (s *Store) ImportCursor(ctx context.Context, source string) (string, error) {
	var cursor *string
	if err := s.db.GetContext(ctx, &cursor, `SELECT import_cursor FROM sources WHERE name = $1`, source); err != nil {
		return "", fmt.Errorf("import cursor of %s: %w", source, postgres.Translate(err))
	}
	if cursor == nil {
		return "", nil
	}
	return *cursor, nil
}

// Import takes in letters an importer read from source after the cursor
// from, already normalised, and moves the cursor to to, in one
// transaction; the letters are grouped and deduplicated as Ingest's are.
// It returns how many were new, or dlq.ErrImportCursorMoved.
func (s *Store) Import(ctx context.Context, source string, letters []dlq.IngestLetter, from, to string) (int, error) {
	created := 0
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE sources SET import_cursor = $3
			WHERE name = $1 AND kind = $4 AND coalesce(import_cursor, '') = $2`, source, from, to, dlq.SourceKindRiver)
		if err != nil {
			return fmt.Errorf("import letters of %s: move the cursor: %w", source, postgres.Translate(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("import letters of %s: move the cursor: %w", source, err)
		}
		if n != 1 {
			return dlq.ErrImportCursorMoved
		}
		results, err := s.ingest(ctx, tx, source, letters)
		if err != nil {
			return err
		}
		for _, r := range results {
			if r.Created {
				created++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return created, nil
}

// ImportChecked records that the importer of source read its queue to the
// end just now, which clears the error it last recorded.
func (s *Store) ImportChecked(ctx context.Context, source string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE sources SET checked_at = now(), last_error = NULL WHERE name = $1`, source); err != nil {
		return fmt.Errorf("record the import of %s: %w", source, postgres.Translate(err))
	}
	return nil
}

// ImportFailed records what stopped the importer of source, for the
// sources page; the letters stay where they were, to be read again.
func (s *Store) ImportFailed(ctx context.Context, source, problem string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE sources SET last_error = $2, last_error_at = now() WHERE name = $1`,
		source, dlq.ClipRunes(problem, 2000)); err != nil {
		return fmt.Errorf("record the failed import of %s: %w", source, postgres.Translate(err))
	}
	return nil
}

// PriorLetters returns, of the external ids given, those source sent
// before, with their letters' ids.
func (s *Store) PriorLetters(ctx context.Context, source string, externalIDs []string) (map[string]int64, error) {
	var rows []struct {
		ExternalID string `db:"external_id"`
		ID         int64  `db:"dead_letter_id"`
	}
	if err := s.db.SelectContext(ctx, &rows, `SELECT external_id, dead_letter_id FROM letter_sources
		WHERE source = $1 AND external_id = ANY($2)`, source, pq.Array(externalIDs)); err != nil {
		return nil, fmt.Errorf("earlier letters of %s: %w", source, postgres.Translate(err))
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.ExternalID] = r.ID
	}
	return out, nil
}
