package handlers

import (
	"context"
	"encoding/json"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
)

// MaskedReads is the store as every page, API answer and export reads it:
// the arguments of dead letters and jobs come back with sensitive values
// replaced by mask.Placeholder, and their error messages and tracebacks
// (and the error groups' sample messages) with those values and the extra
// mask patterns hidden (mask.Policy.MaskText). Masking here, once, rather
// than in each handler means a page added later cannot forget it. Writes pass straight
// through to the real store, and replays read the stored values inside
// their own transactions, so what is replayed is always the real thing.
//
// The one way to see real values is RevealArgs, which audits the reveal
// and marks the request's context for exactly that letter.
type MaskedReads struct {
	*dlq.Store
	Masker mask.Policy
}

// ListDeadLetters masks each letter's arguments.
func (m MaskedReads) ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error) {
	page, err := m.Store.ListDeadLetters(ctx, f)
	for i := range page.Letters {
		m.maskLetter(ctx, &page.Letters[i])
	}
	return page, err
}

// GetDeadLetter masks the letter's arguments unless the request revealed
// this letter.
func (m MaskedReads) GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error) {
	d, err := m.Store.GetDeadLetter(ctx, id)
	m.maskLetter(ctx, &d.DeadLetter)
	return d, err
}

// EachDeadLetter masks each exported letter.
func (m MaskedReads) EachDeadLetter(ctx context.Context, f dlq.Filter, fn func(dlq.DeadLetter) error) error {
	return m.Store.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error {
		m.maskLetter(ctx, &d)
		return fn(d)
	})
}

// Job masks a job's arguments and errors: a replayed job carries the
// letter's arguments.
func (m MaskedReads) Job(ctx context.Context, id int64) (dlq.Job, error) {
	j, err := m.Store.Job(ctx, id)
	dlq.MaskJob(m.Masker, &j)
	return j, err
}

// Jobs masks the last error of each listed job, then cuts it to what the
// list shows.
func (m MaskedReads) Jobs(ctx context.Context, f dlq.JobFilter) (dlq.JobPage, error) {
	page, err := m.Store.Jobs(ctx, f)
	for i := range page.Jobs {
		j := &page.Jobs[i]
		if j.LastError != nil {
			s := clipRunes(m.Masker.MaskText(*j.LastError, j.Args, j.Kwargs), dlq.JobListErrorCap)
			j.LastError = &s
		}
		j.Args, j.Kwargs = nil, nil
	}
	return page, err
}

// OperationJobs masks the last error of a canary's jobs.
func (m MaskedReads) OperationJobs(ctx context.Context, opID int64, limit int) ([]dlq.JobOutcome, error) {
	jobs, err := m.Store.OperationJobs(ctx, opID, limit)
	for i := range jobs {
		j := &jobs[i]
		if j.LastError != nil {
			s := m.Masker.MaskText(*j.LastError, j.Args, j.Kwargs)
			j.LastError = &s
		}
		j.Args, j.Kwargs = nil, nil
	}
	return jobs, err
}

// ListGroups masks each group's sample message as its letter's is.
func (m MaskedReads) ListGroups(ctx context.Context, f dlq.GroupFilter) ([]dlq.ErrorGroup, error) {
	groups, err := m.Store.ListGroups(ctx, f)
	for i := range groups {
		g := &groups[i]
		g.SampleMessage = m.Masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
		g.SampleArgs, g.SampleKwargs = nil, nil
	}
	return groups, err
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// ListAudit masks the arguments an edit-and-replay entry keeps.
func (m MaskedReads) ListAudit(ctx context.Context, f dlq.AuditFilter) (dlq.AuditPage, error) {
	page, err := m.Store.ListAudit(ctx, f)
	for i := range page.Entries {
		m.maskAudit(&page.Entries[i])
	}
	return page, err
}

// EachAuditEntry masks each exported entry.
func (m MaskedReads) EachAuditEntry(ctx context.Context, f dlq.AuditFilter, fn func(dlq.AuditEntry) error) error {
	return m.Store.EachAuditEntry(ctx, f, func(e dlq.AuditEntry) error {
		m.maskAudit(&e)
		return fn(e)
	})
}

// GetAuditEntry masks one entry.
func (m MaskedReads) GetAuditEntry(ctx context.Context, id int64) (dlq.AuditEntry, error) {
	e, err := m.Store.GetAuditEntry(ctx, id)
	m.maskAudit(&e)
	return e, err
}

// maskAudit masks the "before" and "after" arguments an edit-and-replay
// entry records. Only those: elsewhere in details a key like "token_id"
// names no secret, and hiding it would only blur the trail.
func (m MaskedReads) maskAudit(e *dlq.AuditEntry) {
	if len(e.Details) == 0 {
		return
	}
	var d map[string]json.RawMessage
	if json.Unmarshal(e.Details, &d) != nil {
		return
	}
	changed := false
	for _, k := range []string{"before", "after"} {
		if v, ok := d[k]; ok {
			if masked, did := m.Masker.Mask(v); did {
				d[k], changed = masked, true
			}
		}
	}
	if changed {
		if b, err := json.Marshal(d); err == nil {
			e.Details = b
		}
	}
}

func (m MaskedReads) maskLetter(ctx context.Context, d *dlq.DeadLetter) {
	if d.ID != 0 && revealed(ctx, d.ID) {
		return
	}
	dlq.MaskLetter(m.Masker, d)
}

type revealKey struct{}

// withRevealed marks ctx as allowed to see letter id's real arguments.
// Only RevealArgs calls it, after writing the audit entry.
func withRevealed(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, revealKey{}, id)
}

func revealed(ctx context.Context, id int64) bool {
	got, ok := ctx.Value(revealKey{}).(int64)
	return ok && got == id
}

// Group masks the group's sample message as its letter's is.
func (m MaskedReads) Group(ctx context.Context, fingerprint string) (dlq.ErrorGroup, error) {
	g, err := m.Store.Group(ctx, fingerprint)
	g.SampleMessage = m.Masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
	g.SampleArgs, g.SampleKwargs = nil, nil
	return g, err
}
