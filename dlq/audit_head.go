package dlq

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The head of the audit chain. The chain proves that no entry before the
// newest was altered or removed, but nothing inside the database can prove
// where the chain ends: someone who bypasses the append-only triggers
// (a superuser, SET session_replication_role = replica) can delete the
// newest entries and leave a shorter chain that verifies. So the head —
// the newest entry's id and hash — is published where that person cannot
// reach it (the console logs it and exports redrive_audit_head_id), and
// `redrive audit verify --expect-head ID:HASH` checks the chain against
// such a copy: the entry must still be there, with that hash. The chain
// then vouches for everything before it.

// AuditHead names one entry of the chain by its id and hash, as a copy of
// the head records it. A zero ID means the trail is empty; an empty Hash
// (a copy that kept only the id, like the metric) checks the id alone.
type AuditHead struct {
	ID   int64  `db:"id"`
	Hash string `db:"hash"`
}

// String is the head as `redrive audit verify` prints it and
// --expect-head reads it: ID:HASH.
func (h AuditHead) String() string {
	if h.Hash == "" {
		return strconv.FormatInt(h.ID, 10)
	}
	return strconv.FormatInt(h.ID, 10) + ":" + h.Hash
}

// short is the head with its hash cut for messages.
func (h AuditHead) short() string {
	if len(h.Hash) > 12 {
		return fmt.Sprintf("%d:%.12s…", h.ID, h.Hash)
	}
	return h.String()
}

// ParseAuditHead reads ID:HASH, as `redrive audit verify` prints it, or a
// bare ID.
func ParseAuditHead(s string) (AuditHead, error) {
	idText, hash, hasHash := strings.Cut(strings.TrimSpace(s), ":")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil || id < 1 {
		return AuditHead{}, fmt.Errorf("%w: %q is not a head: want ID:HASH as `redrive audit verify` prints it (or a bare ID), ID a positive whole number", ErrInvalid, s)
	}
	hash = strings.ToLower(hash)
	if hasHash {
		if _, err := hex.DecodeString(hash); err != nil || len(hash) != len(genesisHash) {
			return AuditHead{}, fmt.Errorf("%w: %q is not a head: the hash after the colon must be %d hexadecimal digits", ErrInvalid, s, len(genesisHash))
		}
	}
	return AuditHead{ID: id, Hash: hash}, nil
}

// AuditHead returns the newest entry of the chain, or the zero head when
// the trail is empty. It is one probe of the primary key.
func (s *Store) AuditHead(ctx context.Context) (AuditHead, error) {
	var h AuditHead
	err := s.db.GetContext(ctx, &h, `SELECT id, hash FROM audit_events ORDER BY id DESC LIMIT 1`)
	if err != nil && translate(err) != ErrNotFound {
		return AuditHead{}, fmt.Errorf("audit head: %w", err)
	}
	return h, nil
}

// AuditVerification is what a walk of the chain found.
type AuditVerification struct {
	// Entries counts the entries that checked out before the problem, or
	// all of them.
	Entries int64
	// Head is the last entry that checked out: with no problem, the newest.
	Head AuditHead
	// Problem is the first thing wrong, or nil.
	Problem *AuditProblem
}

// expectedHead follows a walk of the chain and finds the first place that
// disagrees with a copy of its head.
type expectedHead struct {
	want AuditHead
	seen bool
}

// check is called with each entry that checked out, after prev (the zero
// head before the first).
func (x *expectedHead) check(prev AuditHead, e AuditEntry) *AuditProblem {
	switch {
	case x.seen || e.ID < x.want.ID:
		return nil
	case e.ID == x.want.ID:
		x.seen = true
		if x.want.Hash != "" && e.Hash != x.want.Hash {
			return &AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
				"entry %d is not the expected head %s: its hash is %.12s…, so it was replaced, and every entry from it on was rewritten",
				e.ID, x.want.short(), e.Hash)}
		}
		return nil
	case prev.ID == 0:
		return &AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the chain starts at entry %d, so entries 1 to %d (the expected head among them) were removed and the chain was begun again",
			x.want.short(), e.ID, e.ID-1)}
	default:
		return &AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the chain goes from entry %d straight to entry %d, so entries %d to %d (the expected head among them) were removed and the chain was continued from entry %d",
			x.want.short(), prev.ID, e.ID, prev.ID+1, e.ID-1, prev.ID)}
	}
}

// end is called after the last entry, the head of the chain.
func (x *expectedHead) end(head AuditHead) *AuditProblem {
	if x.seen {
		return nil
	}
	if head.ID == 0 {
		return &AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
			"the expected head %s is missing: the trail is empty, so every entry up to %d was removed", x.want.short(), x.want.ID)}
	}
	return &AuditProblem{EntryID: x.want.ID, Problem: fmt.Sprintf(
		"the expected head %s is missing: the trail now ends at entry %d (%.12s…), so its tail, entries %d to %d, was removed",
		x.want.short(), head.ID, head.Hash, head.ID+1, x.want.ID)}
}

// VerifyAuditChain walks the whole chain in order, recomputing each hash,
// and returns the first problem: an entry whose content no longer matches
// its hash (altered), or whose prev_hash is not the previous entry's hash
// (one removed or inserted). With expect, a copy of the head taken
// earlier, the entry it names must also be in the chain with its hash: a
// chain whose newest entries were deleted verifies on its own, but not
// against a head it no longer holds.
func (s *Store) VerifyAuditChain(ctx context.Context, expect *AuditHead) (AuditVerification, error) {
	rows, err := s.db.QueryxContext(ctx, `SELECT `+auditColumns+` FROM audit_events ORDER BY id`)
	if err != nil {
		return AuditVerification{}, fmt.Errorf("verify audit: %w", err)
	}
	defer rows.Close()
	var v AuditVerification
	var x *expectedHead
	if expect != nil {
		x = &expectedHead{want: *expect}
	}
	for rows.Next() {
		var e AuditEntry
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
		v.Head = AuditHead{ID: e.ID, Hash: e.Hash}
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
func chainProblem(prev AuditHead, e AuditEntry) *AuditProblem {
	prevHash := prev.Hash
	if prev.ID == 0 {
		prevHash = genesisHash
	}
	if e.PrevHash != prevHash {
		return &AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
			"entry %d follows a missing or altered entry: its prev_hash %.12s… is not the previous entry's hash %.12s…",
			e.ID, e.PrevHash, prevHash)}
	}
	if got := e.computeHash(); got != e.Hash {
		return &AuditProblem{EntryID: e.ID, Problem: fmt.Sprintf(
			"entry %d was altered: its content hashes to %.12s…, not the stored %.12s…", e.ID, got, e.Hash)}
	}
	return nil
}
