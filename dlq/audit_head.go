package dlq

import (
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

// Short is the head with its hash cut for messages.
func (h AuditHead) Short() string {
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
		if _, err := hex.DecodeString(hash); err != nil || len(hash) != len(GenesisHash) {
			return AuditHead{}, fmt.Errorf("%w: %q is not a head: the hash after the colon must be %d hexadecimal digits", ErrInvalid, s, len(GenesisHash))
		}
	}
	return AuditHead{ID: id, Hash: hash}, nil
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
