package dlq

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
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
	GenesisHash         = "0000000000000000000000000000000000000000000000000000000000000000"
	AuditChainLockKey   = 7_240_117_311 // pg_advisory_xact_lock key that serialises the chain
	AuditTimePrecision  = time.Microsecond
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
		e.At.UTC().Truncate(AuditTimePrecision).Format(time.RFC3339Nano), e.Actor, e.Action,
		e.DeadLetterID, e.OperationID, canon(filter), e.MaxID, canon(e.Counts), e.Reason,
		e.RequestID, e.RemoteAddr, e.UserAgent, canon(e.Details), e.PrevHash,
	})
	return b
}

// ComputeHash is the entry's link in the chain: the hash of its content
// and its predecessor's hash.
func (e AuditEntry) ComputeHash() string {
	sum := sha256.Sum256(e.hashContent())
	return hex.EncodeToString(sum[:])
}

// AuditProblem describes the first place the chain is broken.
type AuditProblem struct {
	EntryID int64
	Problem string
}
