package audit

import (
	"context"
	"fmt"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// AuditHead returns the newest entry of the chain, or the zero head when
// the trail is empty. It is one probe of the primary key.
func (s *Store) AuditHead(ctx context.Context) (dlq.AuditHead, error) {
	var h dlq.AuditHead
	err := s.db.GetContext(ctx, &h, `SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1`)
	if err != nil && postgres.Translate(err) != dlq.ErrNotFound {
		return dlq.AuditHead{}, fmt.Errorf("audit head: %w", err)
	}
	return h, nil
}

// expectedHead follows a walk of the chain and finds the first place that
// disagrees with a copy of its head.
type expectedHead struct {
	want dlq.AuditHead
	seen bool
}

// check is called with each entry that checked out, after prev (the zero
// head before the first).
func (x *expectedHead) check(prev dlq.AuditHead, e dlq.AuditEntry) *dlq.AuditProblem {
	switch {
	case x.seen || e.ID < x.want.ID:
		return nil
	case e.ID == x.want.ID:
		x.seen = true
		if x.want.Hash != "" && e.Hash != x.want.Hash {
			return &dlq.AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
				"entry %d is not the expected head %s: its hash is %.12s…, so it was replaced, and every entry from it on was rewritten",
				e.ID, x.want.Short(), e.Hash)}
		}
		return nil
	case prev.ID == 0:
		return &dlq.AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the chain starts at entry %d, so entries 1 to %d (the expected head among them) were removed and the chain was begun again",
			x.want.Short(), e.ID, e.ID-1)}
	default:
		return &dlq.AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the chain goes from entry %d straight to entry %d, so entries %d to %d (the expected head among them) were removed and the chain was continued from entry %d",
			x.want.Short(), prev.ID, e.ID, prev.ID+1, e.ID-1, prev.ID)}
	}
}

// end is called after the last entry, the head of the chain.
func (x *expectedHead) end(head dlq.AuditHead) *dlq.AuditProblem {
	if x.seen {
		return nil
	}
	if head.ID == 0 {
		return &dlq.AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the trail is empty, so every entry up to %d was removed", x.want.Short(), x.want.ID)}
	}
	return &dlq.AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
		"the expected head %s is missing: the trail now ends at entry %d (%.12s…), so its tail, entries %d to %d, was removed",
		x.want.Short(), head.ID, head.Hash, head.ID+1, x.want.ID)}
}

// VerifyAuditChain walks the whole chain in order, recomputing each hash,
// and returns the first problem: an entry whose content no longer matches
// its hash (altered), or whose prev_hash is not the previous entry's hash
// (one removed or inserted). With expect, a copy of the head taken
// earlier, the entry it names must also be in the chain with its hash: a
// chain whose newest entries were deleted verifies on its own, but not
// against a head it no longer holds.
func (s *Store) VerifyAuditChain(ctx context.Context, expect *dlq.AuditHead) (dlq.AuditVerification, error) {
	rows, err := s.db.QueryxContext(ctx, `SELECT `+auditColumns+` FROM audit_events ORDER BY id`)
	if err != nil {
		return dlq.AuditVerification{}, fmt.Errorf("verify audit: %w", err)
	}
	defer rows.Close()
	var v dlq.AuditVerification
	var x *expectedHead
	if expect != nil {
		x = &expectedHead{want: *expect}
	}
	for rows.Next() {
		var e dlq.AuditEntry
		if err := rows.StructScan(&e); err != nil {
			return v, fmt.Errorf("verify audit: %w", err)
		}
		if v.Problem = chainProblem(v.Head, e); v.Problem == nil && x != nil {
			v.Problem = x.check(v.Head, e)
		}
		if v.Problem != nil {
			return v, nil
		}
		v.Entries++
		v.Head = dlq.AuditHead{ID: e.ID, Hash: e.Hash}
	}
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("verify audit: %w", err)
	}
	if x != nil {
		v.Problem = x.end(v.Head)
	}
	return v, nil
}

// chainProblem checks e against the entry before it (prev; the zero head
// before the first entry).
func chainProblem(prev dlq.AuditHead, e dlq.AuditEntry) *dlq.AuditProblem {
	prevHash := prev.Hash
	if prev.ID == 0 {
		prevHash = dlq.GenesisHash
	}
	if e.PrevHash != prevHash {
		return &dlq.AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
			"entry %d follows a missing or altered entry: its prev_hash %.12s… is not the previous entry's hash %.12s…",
			e.ID, e.PrevHash, prevHash)}
	}
	if got := e.ComputeHash(); got != e.Hash {
		return &dlq.AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
			"entry %d was altered: its content hashes to %.12s…, not the stored %.12s…", e.ID, got, e.Hash)}
	}
	return nil
}
