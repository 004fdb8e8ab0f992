package queue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
)

// cancelRequestsSQL finds the cancel requests for the attempts a worker
// holds: how a worker that missed the NOTIFY (no LISTEN connection, or it
// was down) learns of them, at its next heartbeat. A request for an earlier
// attempt is stale and ignored.
const cancelRequestsSQL = `
SELECT j.cancel_requested FROM jobs j
JOIN unnest($1::bigint[], $2::int[]) AS held(id, attempt) ON held.id = j.id AND held.attempt = j.attempt
WHERE j.state = 'running' AND j.lease_owner = $3 AND j.cancel_requested IS NOT NULL
	AND (j.cancel_requested->>'attempt')::int = j.attempt`

// CancelRequests returns the cancel requests for attempts worker holds.
func (s *Store) CancelRequests(ctx context.Context, worker string, held []dlq.Lease) ([]dlq.CancelRequest, error) {
	if len(held) == 0 {
		return nil, nil
	}
	ids, attempts := LeaseArrays(held)
	var raws [][]byte
	if err := s.db.SelectContext(ctx, &raws, cancelRequestsSQL, pq.Array(ids), pq.Array(attempts), worker); err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", err)
	}
	out := make([]dlq.CancelRequest, 0, len(raws))
	for _, raw := range raws {
		var r dlq.CancelRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("read cancel requests: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}
