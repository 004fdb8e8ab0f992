package dlq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Audit actions. Every change to a dead letter writes one of these.
const (
	ActionReplay        = "replay"
	ActionEditReplay    = "edit_replay"
	ActionDiscard       = "discard"
	ActionRestore       = "restore"
	ActionBulkStart     = "bulk_start"
	ActionBulkFinish    = "bulk_finish"
	ActionBulkCancel    = "bulk_cancel"
	ActionCanaryRelease = "canary_release"
	ActionPurge         = "purge"
	ActionRevealArgs    = "reveal_args"
	ActionSignIn        = "sign_in"
	ActionSignInFailed  = "sign_in_failed"
	ActionUserChange    = "user_change"
	ActionTokenChange   = "token_change"
	ActionJobRunNow     = "job_run_now"
	ActionJobKill       = "job_kill"
	ActionJobCancel     = "job_cancel"
	genesisHash         = "0000000000000000000000000000000000000000000000000000000000000000"
	auditChainLockKey   = 7_240_117_311 // pg_advisory_xact_lock key that serialises the chain
	auditTimePrecision  = time.Microsecond
)

// Actor says who acted and from where; it goes into every audit entry.
type Actor struct {
	Name       string
	RequestID  string
	RemoteAddr string
	UserAgent  string
}

// AuditEntry is one line of the audit trail.
type AuditEntry struct {
	ID           int64            `db:"id" json:"id"`
	At           time.Time        `db:"at" json:"at"`
	Actor        string           `db:"actor" json:"actor"`
	Action       string           `db:"action" json:"action"`
	DeadLetterID *int64           `db:"dead_letter_id" json:"dead_letter_id,omitempty"`
	OperationID  *int64           `db:"operation_id" json:"operation_id,omitempty"`
	Filter       *json.RawMessage `db:"filter" json:"filter,omitempty"`
	MaxID        *int64           `db:"max_id" json:"max_id,omitempty"`
	Counts       json.RawMessage  `db:"counts" json:"counts"`
	Reason       string           `db:"reason" json:"reason,omitempty"`
	RequestID    string           `db:"request_id" json:"request_id,omitempty"`
	RemoteAddr   string           `db:"remote_addr" json:"remote_addr,omitempty"`
	UserAgent    string           `db:"user_agent" json:"user_agent,omitempty"`
	Details      json.RawMessage  `db:"details" json:"details"`
	PrevHash     string           `db:"prev_hash" json:"prev_hash"`
	Hash         string           `db:"hash" json:"hash"`
}

const auditColumns = `id, at, actor, action, dead_letter_id, operation_id, filter, max_id, counts, reason,
	request_id, remote_addr, user_agent, details, prev_hash, hash`

// hashContent is what an entry's hash covers, in a fixed field order: every
// column except id (assigned by the sequence) and the hash itself.
func (e AuditEntry) hashContent() []byte {
	canon := func(raw json.RawMessage) string {
		if len(raw) == 0 {
			return "null"
		}
		// Postgres jsonb normalises key order and spacing; so does this.
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return string(raw)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	var filter json.RawMessage
	if e.Filter != nil {
		filter = *e.Filter
	}
	b, _ := json.Marshal([]any{
		e.At.UTC().Truncate(auditTimePrecision).Format(time.RFC3339Nano), e.Actor, e.Action,
		e.DeadLetterID, e.OperationID, canon(filter), e.MaxID, canon(e.Counts), e.Reason,
		e.RequestID, e.RemoteAddr, e.UserAgent, canon(e.Details), e.PrevHash,
	})
	return b
}

func (e AuditEntry) computeHash() string {
	sum := sha256.Sum256(e.hashContent())
	return hex.EncodeToString(sum[:])
}

// appendAudit adds e to the chain inside tx. The advisory lock serialises
// writers until tx ends, so each entry's prev_hash is the hash of the entry
// committed just before it; it costs one short wait per audited action.
func appendAudit(ctx context.Context, tx *sqlx.Tx, e AuditEntry) (int64, error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, auditChainLockKey); err != nil {
		return 0, fmt.Errorf("audit: lock chain: %w", err)
	}
	prev := genesisHash
	err := tx.GetContext(ctx, &prev, `SELECT hash FROM audit_events ORDER BY id DESC LIMIT 1`)
	if err != nil && translate(err) != ErrNotFound {
		return 0, fmt.Errorf("audit: read chain head: %w", err)
	}
	e.PrevHash = prev
	e.At = e.At.UTC().Truncate(auditTimePrecision)
	if len(e.Counts) == 0 {
		e.Counts = json.RawMessage(`{}`)
	}
	if len(e.Details) == 0 {
		e.Details = json.RawMessage(`{}`)
	}
	e.Hash = e.computeHash()
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

// AuditProblem describes the first place the chain is broken.
type AuditProblem struct {
	EntryID int64
	Problem string
}

// VerifyAudit walks the whole chain in order, recomputing each hash. It
// returns the number of entries checked (the broken one included) and the
// first problem, if any; VerifyAuditChain also returns the head and checks
// it against a copy.
func (s *Store) VerifyAudit(ctx context.Context) (int64, *AuditProblem, error) {
	v, err := s.VerifyAuditChain(ctx, nil)
	n := v.Entries
	if v.Problem != nil {
		n++
	}
	return n, v.Problem, err
}
