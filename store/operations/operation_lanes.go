package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// laneBlock is how many consecutive letter ids go to one lane before the
// next lane takes the next block. Ids follow failure time, so a block is
// a stretch of the letters' pages (about 128 of their heap, 5 of the
// pending rows'): each page is then read and changed by one lane, where
// alternate ids had both lanes fetch, lock and dirty every page. Bulk
// replay of 100,000 of a million seeded letters, alternating builds on one
// private cluster, 6 runs each: 4.13 s (3.69-5.42) with blocks of 512,
// 4.66 s (4.38-5.73) with alternate ids. Small enough that an operation of
// a few thousand letters still keeps both lanes busy.
const laneBlock = 512

// laneCursor is where one lane of an operation is: the last letter its
// batches saw, or Done when its share of the selection is exhausted.
type laneCursor struct {
	FailedAt *time.Time `json:"failed_at,omitempty"`
	ID       int64      `json:"id"`
	Done     bool       `json:"done,omitempty"`
}

// laneCursors decodes op's lane cursors; a lane that has none starts where the
// single stream of batches (the canary) left off.
func laneCursors(op dlq.Operation) (map[string]laneCursor, error) {
	out := map[string]laneCursor{}
	if op.LaneCursors != nil {
		if err := json.Unmarshal(*op.LaneCursors, &out); err != nil {
			return nil, fmt.Errorf("lane cursors: %w", err)
		}
	}
	return out, nil
}

// laneLockSQL takes the lock that lets one batch of a lane run at a time,
// across console processes. Transaction-scoped, so a crashed process
// holds nothing, and it works through a transaction pooler.
const laneLockSQL = `SELECT pg_try_advisory_xact_lock(hashtextextended('operation-lane:' || $1::bigint || ':' || $2::int, 0))`

// RunOperationLane does the next batch of one lane of a running operation
// (lane 0 to lanes-1) in one transaction. Lane k takes the letters of the
// selection in every lanes-th block of laneBlock ids, starting with block
// k, with a cursor of its own, so the lanes of an operation never take the
// same letter, and the claim (deleting the letter's pending row,
// batchSelectSQL) still makes a letter change once whoever else acts on
// it. Each batch commits its letters, its lane's cursor and the
// operation's counts together, as RunOperationBatch does; unlike it, a
// lane does not hold the operation's row while it works (laneStream).
//
// An operation that is not Laned runs in one stream: lane 0 does its next
// batch through RunOperationBatch and the other lanes do nothing.
func (s *Store) RunOperationLane(ctx context.Context, opID int64, lane, lanes, batchSize int, now time.Time) (dlq.BatchResult, error) {
	if lanes < 1 || lane < 0 || lane >= lanes {
		return dlq.BatchResult{}, fmt.Errorf("operation %d: lane %d of %d", opID, lane, lanes)
	}
	op, err := s.Operation(ctx, opID)
	if err != nil {
		return dlq.BatchResult{}, err
	}
	if op.State != dlq.OpRunning || !op.Laned() || lanes == 1 {
		return s.runOneStream(ctx, op, lane, batchSize, now)
	}
	var res dlq.BatchResult
	err = postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) (err error) {
		res, err = nextBatch(ctx, tx, s.probe, laneStream{opID: opID, lane: lane, lanes: lanes, size: batchSize}, now)
		return err
	})
	if errors.Is(err, errLaneStopped) {
		return dlq.BatchResult{State: dlq.OpCancelled}, nil
	}
	if err != nil {
		return dlq.BatchResult{}, fmt.Errorf("operation %d lane %d: %w", opID, lane, err)
	}
	return res, nil
}

// runOneStream is RunOperationLane for an operation whose batches run in
// one stream (or that is not running): lane 0 runs its next batch, the
// other lanes report its state.
func (s *Store) runOneStream(ctx context.Context, op dlq.Operation, lane, batchSize int, now time.Time) (dlq.BatchResult, error) {
	if lane == 0 {
		return s.RunOperationBatch(ctx, op.ID, batchSize, now)
	}
	return dlq.BatchResult{State: op.State, Finished: op.State.Finished()}, nil
}

// laneStream is one lane's stream of batches (RunOperationLane), after the
// lane's own cursor in the operation's lane_cursors.
//
// A lane does not hold the operation's row while it works, which would
// serialise the lanes: it reads the row (lock), works, and then moves its
// cursor and the counts with an UPDATE guarded on the operation still
// running (advance). A cancel that came in meanwhile wins: the batch rolls
// back whole. The lane that finds the others done finishes the operation;
// the row lock of that last UPDATE orders the lanes' ends.
type laneStream struct {
	opID        int64
	lane, lanes int
	size        int
}

func (l laneStream) share() (lane, lanes int) { return l.lane, l.lanes }

// key is the lane's key in lane_cursors.
func (l laneStream) key() string { return strconv.Itoa(l.lane) }

// lock takes the lane's advisory lock and then reads the operation; false
// when another process runs this lane.
func (l laneStream) lock(ctx context.Context, tx *sqlx.Tx) (dlq.Operation, bool, error) {
	var op dlq.Operation
	var locked bool
	if err := tx.GetContext(ctx, &locked, laneLockSQL, l.opID, l.lane); err != nil {
		return op, false, fmt.Errorf("lock lane: %w", err)
	}
	if !locked {
		return op, false, nil
	}
	// Read after the lock: the lane's cursor as its last batch committed it.
	if err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, l.opID); err != nil {
		return op, false, fmt.Errorf("operation: %w", postgres.Translate(err))
	}
	return op, true, nil
}

// next starts the lane where its cursor is, or where the single stream of
// batches (the canary) left off if it has none yet; false once the lane
// is through (another lane finishes the operation).
func (l laneStream) next(_ context.Context, _ *sqlx.Tx, op dlq.Operation) (batchCursor, int, bool, error) {
	cursors, err := laneCursors(op)
	if err != nil {
		return batchCursor{}, 0, false, err
	}
	cur, ok := cursors[l.key()]
	if !ok {
		cur = laneCursor{FailedAt: op.CursorFailedAt, ID: op.CursorID}
	}
	return batchCursor{FailedAt: cur.FailedAt, ID: cur.ID}, l.size, !cur.Done, nil
}

// advance moves the lane's cursor past the batch (or marks the lane done
// where it stood, when the batch found nothing) and adds the batch to the
// operation's counts. The operation is finished once every lane is done.
func (l laneStream) advance(ctx context.Context, tx *sqlx.Tx, op dlq.Operation, b batch) (dlq.Operation, bool, error) {
	next := laneCursor{FailedAt: b.last.FailedAt, ID: b.last.ID}
	if b.seen == 0 {
		next = laneCursor{FailedAt: b.from.FailedAt, ID: b.from.ID, Done: true}
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return op, false, err
	}
	var after dlq.Operation
	err = tx.GetContext(ctx, &after, `UPDATE operations SET
			lane_cursors = jsonb_set(coalesce(lane_cursors, '{}'), ARRAY[$2::text], $3::jsonb),
			done_count = done_count + $4, skipped = skipped + $5, updated_at = now()
			WHERE id = $1 AND state = 'running'
			RETURNING `+operationColumns, op.ID, l.key(), string(raw), b.acted, b.seen-b.acted)
	if postgres.Translate(err) == dlq.ErrNotFound {
		// Cancelled (or stopped) while the batch ran: undo the batch.
		return op, false, errLaneStopped
	}
	if err != nil {
		return op, false, fmt.Errorf("advance operation: %w", err)
	}
	if b.seen > 0 {
		return after, false, nil
	}
	// This lane is through; the operation is, once every lane is.
	done, err := lanesDone(after, l.lanes)
	return after, done, err
}

// lanesDone reports whether every one of op's lanes is through.
func lanesDone(op dlq.Operation, lanes int) (bool, error) {
	cursors, err := laneCursors(op)
	if err != nil {
		return false, err
	}
	for l := range lanes {
		if !cursors[strconv.Itoa(l)].Done {
			return false, nil
		}
	}
	return true, nil
}

// errLaneStopped rolls back a lane's batch whose operation stopped while
// it ran.
var errLaneStopped = errors.New("operation stopped")
