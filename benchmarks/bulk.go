package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// bulkPoll is how often the harness reads the operation while it runs:
// the API answers at once (wait_seconds 0), so this is the resolution of
// the measurement.
const bulkPoll = 20 * time.Millisecond

// windowSQL finds where the newest $1 pending letters begin, by failure
// time: a filter "failed since T" then matches them ("everything that
// failed since the incident began"), as in handlers' BenchmarkBulkReplay100k.
const windowSQL = `SELECT failed_at FROM dead_letters WHERE status = 'pending'
	ORDER BY failed_at DESC, id DESC OFFSET $1 - 1 LIMIT 1`

// bulk replays the newest BulkSlice pending letters by filter, then
// discards the next BulkSlice (which are then the newest pending), each
// end to end: the API call, the durable operation, the runner's batches.
func (s *suite) bulk(ctx context.Context, srv *server, db *pgxpool.Pool, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	r := redriveEngine{}
	var errs []error
	for _, action := range []string{"replay", "discard"} {
		rate, err := s.bulkAction(ctx, srv, db, action)
		if err != nil {
			s.failRecord(r, "bulk."+action)
			errs = append(errs, err)
			continue
		}
		s.record("bulk."+action, r, round, rate)
	}
	return errors.Join(errs...)
}

// bulkOperation is the part of the API's operation the harness reads.
type bulkOperation struct {
	OperationID *int64 `json:"operation_id"`
	State       string `json:"state"`
	Replayed    *int64 `json:"replayed"`
	Discarded   *int64 `json:"discarded"`
	Error       string `json:"error"`
}

func (op bulkOperation) done() int64 {
	switch {
	case op.Replayed != nil:
		return *op.Replayed
	case op.Discarded != nil:
		return *op.Discarded
	}
	return 0
}

// bulkAction runs one bulk action and returns letters per second: from
// the API call until every letter is acted on. For a discard that is the
// operation done; a replay is then settling, following its replays until
// they run, and no worker runs here, so the harness stops following it
// (as an operator may), which finishes it.
func (s *suite) bulkAction(ctx context.Context, srv *server, db *pgxpool.Pool, action string) (float64, error) {
	body, err := s.bulkBody(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("bulk %s: %w", action, err)
	}
	if err := s.c.quiesce(ctx); err != nil {
		return 0, fmt.Errorf("bulk %s: %w", action, err)
	}
	start := time.Now()
	code, op, err := srv.runOperation(ctx, "/api/v1/dead-letters/"+action, body)
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("bulk %s: %w", action, err)
	}
	if code, op, err = srv.stopFollowingSettling(ctx, code, op); err != nil {
		return 0, fmt.Errorf("bulk %s: %w", action, err)
	}
	if code != http.StatusOK || op.State != "done" {
		return 0, fmt.Errorf("bulk %s: %d, state %q %s", action, code, op.State, op.Error)
	}
	if n := op.done(); n < int64(s.sizes.BulkSlice) {
		return 0, fmt.Errorf("bulk %s: acted on %d letters, want at least %d", action, n, s.sizes.BulkSlice)
	}
	return perSecond(int(op.done()), took), nil
}

// bulkBody is the bulk request's body: the letters of the newest
// BulkSlice, selected by a since filter, so that every action of the run
// acts on the same number of letters.
func (s *suite) bulkBody(ctx context.Context, db *pgxpool.Pool) (string, error) {
	var since time.Time
	if err := db.QueryRow(ctx, windowSQL, s.sizes.BulkSlice).Scan(&since); err != nil {
		return "", fmt.Errorf("find the window: %w", err)
	}
	body, err := json.Marshal(map[string]any{
		"filter":       map[string]string{"since": since.UTC().Format(time.RFC3339Nano)},
		"reason":       "benchmark",
		"wait_seconds": 0,
	})
	if err != nil {
		return "", err
	}
	return string(body), nil
}

// runOperation starts a bulk operation at path and polls it until it is
// no longer running, which is what the benchmark times; the last answer
// is returned as it came.
func (srv *server) runOperation(ctx context.Context, path, body string) (int, bulkOperation, error) {
	code, op, err := srv.operation(ctx, http.MethodPost, path, body)
	for err == nil && code == http.StatusAccepted && op.State == "running" {
		if op.OperationID == nil {
			return 0, bulkOperation{}, errors.New("202 without an operation id")
		}
		select {
		case <-ctx.Done():
			return 0, bulkOperation{}, ctx.Err()
		case <-time.After(bulkPoll):
		}
		code, op, err = srv.operation(ctx, http.MethodGet, fmt.Sprintf("/api/v1/operations/%d", *op.OperationID), "")
	}
	return code, op, err
}

// stopFollowingSettling finishes a replay that is settling: no worker
// runs here, so its replays would never settle. Stopping following it, as
// an operator may, finishes it. Any other operation is returned as given.
func (srv *server) stopFollowingSettling(ctx context.Context, code int, op bulkOperation) (int, bulkOperation, error) {
	if op.State != "settling" || op.OperationID == nil {
		return code, op, nil
	}
	path := fmt.Sprintf("/api/v1/operations/%d/stop-following", *op.OperationID)
	return srv.operation(ctx, http.MethodPost, path, "")
}

// operation calls the bulk API and decodes the operation it answers with.
func (srv *server) operation(ctx context.Context, method, path, body string) (int, bulkOperation, error) {
	code, b, err := srv.do(ctx, method, path, body)
	if err != nil {
		return 0, bulkOperation{}, err
	}
	var op bulkOperation
	if err := json.Unmarshal(b, &op); err != nil {
		return 0, bulkOperation{}, fmt.Errorf("%s %s: %d %.200s", method, path, code, b)
	}
	return code, op, nil
}
