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
// same letter, and the guarded UPDATE still makes a letter change once
// whoever else acts on it. Each batch commits its letters, its lane's
// cursor and the operation's counts together, as RunOperationBatch does.
//
// Unlike RunOperationBatch, a lane does not hold the operation's row while
// it works, which would serialise the lanes: it reads the row, works, and
// then moves its cursor and the counts with an UPDATE guarded on the
// operation still running. A cancel that came in meanwhile wins: the batch
// rolls back whole. The lane that finds the others done finishes the
// operation; the row lock of that last UPDATE orders the lanes' ends.
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
		if lane == 0 {
			return s.RunOperationBatch(ctx, opID, batchSize, now)
		}
		return dlq.BatchResult{State: op.State, Finished: op.State.Finished()}, nil
	}
	var res dlq.BatchResult
	err = postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var locked bool
		if err := tx.GetContext(ctx, &locked, laneLockSQL, opID, lane); err != nil {
			return fmt.Errorf("lock lane: %w", err)
		}
		if !locked {
			res.State = dlq.OpRunning // another process runs this lane
			return nil
		}
		// Read after the lock: the lane's cursor as its last batch committed it.
		if err := tx.GetContext(ctx, &op, `SELECT `+operationColumns+` FROM operations WHERE id = $1`, opID); err != nil {
			return fmt.Errorf("operation: %w", postgres.Translate(err))
		}
		res.State = op.State
		if op.State != dlq.OpRunning {
			res.Finished = op.State.Finished()
			return nil
		}
		cursors, err := laneCursors(op)
		if err != nil {
			return err
		}
		key := strconv.Itoa(lane)
		cur, ok := cursors[key]
		if !ok {
			cur = laneCursor{FailedAt: op.CursorFailedAt, ID: op.CursorID}
		}
		if cur.Done {
			return nil // this lane is through; another finishes the operation
		}
		sel, err := op.StoredSelection()
		if err != nil {
			return err
		}
		laneOp := op
		laneOp.CursorFailedAt, laneOp.CursorID = cur.FailedAt, cur.ID
		query, args, err := batchQuery(laneOp, sel, batchSize, lane, lanes)
		if err != nil {
			return err
		}
		var last batchCursor
		var seen, acted int
		if err := tx.QueryRowxContext(ctx, query, args...).Scan(&last.FailedAt, &last.ID, &seen, &acted); err != nil {
			return fmt.Errorf("%s batch: %w", op.Kind, err)
		}
		res.Acted, res.Skipped = acted, seen-acted
		next := laneCursor{FailedAt: last.FailedAt, ID: last.ID}
		if seen == 0 {
			next = laneCursor{FailedAt: cur.FailedAt, ID: cur.ID, Done: true}
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return err
		}
		var after dlq.Operation
		err = tx.GetContext(ctx, &after, `UPDATE operations SET
			lane_cursors = jsonb_set(coalesce(lane_cursors, '{}'), ARRAY[$2::text], $3::jsonb),
			done_count = done_count + $4, skipped = skipped + $5, updated_at = now()
			WHERE id = $1 AND state = 'running'
			RETURNING `+operationColumns, op.ID, key, string(raw), acted, seen-acted)
		if postgres.Translate(err) == dlq.ErrNotFound {
			// Cancelled (or stopped) while the batch ran: undo the batch.
			return errLaneStopped
		}
		if err != nil {
			return fmt.Errorf("advance operation: %w", err)
		}
		if seen > 0 {
			return nil
		}
		// This lane is through; the operation is, once every lane is.
		cursors, err = laneCursors(after)
		if err != nil {
			return err
		}
		for l := range lanes {
			if !cursors[strconv.Itoa(l)].Done {
				return nil
			}
		}
		res.State, err = finishOperation(ctx, tx, after, now)
		res.Finished = res.State.Finished()
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

// errLaneStopped rolls back a lane's batch whose operation stopped while
// it ran.
var errLaneStopped = errors.New("operation stopped")
