package letters

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
)

// exportBatch is how many letters one export round trip reads: large enough
// that 100,000 letters take 100 queries, small enough that memory holds one
// batch, whatever the export's size.
const exportBatch = 1000

// EachDeadLetter calls fn for every letter f selects (its limit and cursor
// aside), newest first, reading keyset batches of exportBatch. Nothing but
// the current batch is held, so an export of a million letters streams in
// constant memory. There is no long transaction either: failed_at and id
// never change, so consecutive batches can neither skip nor repeat a
// letter; letters that die during the export are newer than its start and
// are simply not in it.
func (s *Store) EachDeadLetter(ctx context.Context, f dlq.Filter, fn func(dlq.DeadLetter) error) error {
	f.After = nil
	for {
		page, err := s.listPage(ctx, f, exportBatch)
		if err != nil {
			return fmt.Errorf("export dead letters: %w", err)
		}
		for _, d := range page.Letters {
			if err := fn(d); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("export dead letters: %w", err)
		}
		f.After = page.Next
	}
}
