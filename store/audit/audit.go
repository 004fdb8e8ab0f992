package audit

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

const auditColumns = `id, at, actor, action, dead_letter_id, operation_id, filter, max_id, counts, reason,
	request_id, remote_addr, user_agent, details, prev_hash, hash`

// AppendAudit adds e to the chain inside tx. The advisory lock serialises
// writers until tx ends, so each entry's prev_hash is the hash of the entry
// committed just before it; it costs one short wait per audited action.
func AppendAudit(ctx context.Context, tx *sqlx.Tx, e dlq.AuditEntry) (int64, error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, dlq.AuditChainLockKey); err != nil {
		return 0, fmt.Errorf("audit: lock chain: %w", err)
	}
	prev := dlq.GenesisHash
	err := tx.GetContext(ctx, &prev, `SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1`)
	if err != nil && postgres.Translate(err) != dlq.ErrNotFound {
		return 0, fmt.Errorf("audit: read chain head: %w", err)
	}
	e.PrevHash = prev
	e.At = e.At.UTC().Truncate(dlq.AuditTimePrecision)
	if len(e.Counts) == 0 {
		e.Counts = json.RawMessage(`{}`)
	}
	if len(e.Details) == 0 {
		e.Details = json.RawMessage(`{}`)
	}
	e.Hash = e.ComputeHash()
	var id int64
	err = tx.GetContext(ctx, &id, `
		INSERT INTO audit_events (at, actor, action, dead_letter_id, operation_id, filter, max_id, counts, reason,
			request_id, remote_addr, user_agent, details, prev_hash, hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		RETURNING id`,
		e.At, e.Actor, e.Action, e.DeadLetterID, e.OperationID, nullJSON(e.Filter), e.MaxID, []byte(e.Counts),
		e.Reason, e.RequestID, e.RemoteAddr, e.UserAgent, []byte(e.Details), e.PrevHash, e.Hash)
	if err != nil {
		return 0, fmt.Errorf("audit: append: %w", err)
	}
	return id, nil
}

func nullJSON(raw *json.RawMessage) any {
	if raw == nil || len(*raw) == 0 {
		return nil
	}
	return []byte(*raw)
}

// VerifyAudit walks the whole chain in order, recomputing each hash. It
// returns the number of entries checked (the broken one included) and the
// first problem, if any; VerifyAuditChain also returns the head and checks
// it against a copy.
func (s *Store) VerifyAudit(ctx context.Context) (int64, *dlq.AuditProblem, error) {
	v, err := s.VerifyAuditChain(ctx, nil)
	n := v.Entries
	if v.Problem != nil {
		n++
	}
	return n, v.Problem, err
}

// MustJSON encodes v, a plain map of an audit entry's details.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only called with plain maps
	}
	return b
}
