// Package reads is the one way the console reads what may hold secrets:
// dead letters, jobs, error groups, incidents and the audit trail come back
// with the arguments' sensitive values replaced by mask.Placeholder, and
// their error messages and tracebacks (and the groups' sample messages)
// with those values and the extra mask patterns hidden
// (mask.Policy.MaskText). Masking here, once, rather than in each handler
// means a page added later cannot forget it, and a handler given a Masked
// cannot reach an unmasked read through it: the stores it wraps are not
// exported. Replays read the stored values inside their own transactions,
// so what is replayed is always the real thing.
//
// The one way to see real values is the audited reveal, which marks the
// request's context for exactly that letter (WithRevealed).
package reads

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/queue"
)

// Stores are the rooms of the store Masked reads from; on a replica, the
// read-only ones opened on its handle.
type Stores struct {
	Letters    *letters.Store
	Groups     *groups.Store
	Queue      *queue.Store
	Operations *operations.Store
	Audit      *audit.Store
}

// Masked reads through the stores with masker's policy. Its reads that hold
// no secret (counts, charts, ids) pass straight through, so that a page
// reads everything from one Masked.
type Masked struct {
	letters    *letters.Store
	groups     *groups.Store
	queue      *queue.Store
	operations *operations.Store
	audit      *audit.Store
	masker     mask.Policy
}

// New returns the masked reads over s.
func New(s Stores, masker mask.Policy) *Masked {
	return &Masked{letters: s.Letters, groups: s.Groups, queue: s.Queue, operations: s.Operations, audit: s.Audit, masker: masker}
}

// Masker is the policy the reads mask with.
func (m *Masked) Masker() mask.Policy { return m.masker }

// ListDeadLetters masks each letter's arguments.
func (m *Masked) ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error) {
	page, err := m.letters.ListDeadLetters(ctx, f)
	for i := range page.Letters {
		m.maskLetter(ctx, &page.Letters[i])
	}
	return page, err
}

// GetDeadLetter masks the letter's arguments unless the request revealed
// this letter.
func (m *Masked) GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error) {
	d, err := m.letters.GetDeadLetter(ctx, id)
	m.maskLetter(ctx, &d.DeadLetter)
	return d, err
}

// EachDeadLetter masks each exported letter.
func (m *Masked) EachDeadLetter(ctx context.Context, f dlq.Filter, fn func(dlq.DeadLetter) error) error {
	return m.letters.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error {
		m.maskLetter(ctx, &d)
		return fn(d)
	})
}

// Job masks a job's arguments and errors: a replayed job carries the
// letter's arguments.
func (m *Masked) Job(ctx context.Context, id int64) (dlq.Job, error) {
	j, err := m.queue.Job(ctx, id)
	dlq.MaskJob(m.masker, &j)
	return j, err
}

// Jobs masks the last error of each listed job, then cuts it to what the
// list shows.
func (m *Masked) Jobs(ctx context.Context, f dlq.JobFilter) (dlq.JobPage, error) {
	page, err := m.queue.Jobs(ctx, f)
	for i := range page.Jobs {
		j := &page.Jobs[i]
		if j.LastError != nil {
			s := firstRunes(m.masker.MaskText(*j.LastError, j.Args, j.Kwargs), dlq.JobListErrorCap)
			j.LastError = &s
		}
		j.Args, j.Kwargs = nil, nil
	}
	return page, err
}

// OperationJobs masks the last error of a canary's jobs.
func (m *Masked) OperationJobs(ctx context.Context, opID int64, limit int) ([]dlq.JobOutcome, error) {
	jobs, err := m.operations.OperationJobs(ctx, opID, limit)
	for i := range jobs {
		j := &jobs[i]
		if j.LastError != nil {
			s := m.masker.MaskText(*j.LastError, j.Args, j.Kwargs)
			j.LastError = &s
		}
		j.Args, j.Kwargs = nil, nil
	}
	return jobs, err
}

// ListGroups masks each group's sample message as its letter's is.
func (m *Masked) ListGroups(ctx context.Context, f dlq.GroupFilter) ([]dlq.ErrorGroup, error) {
	groups, err := m.groups.ListGroups(ctx, f)
	for i := range groups {
		g := &groups[i]
		g.SampleMessage = m.masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
		g.SampleArgs, g.SampleKwargs = nil, nil
	}
	return groups, err
}

// ListAudit masks the arguments an edit-and-replay entry keeps.
func (m *Masked) ListAudit(ctx context.Context, f dlq.AuditFilter) (dlq.AuditPage, error) {
	page, err := m.audit.ListAudit(ctx, f)
	for i := range page.Entries {
		m.maskAudit(&page.Entries[i])
	}
	return page, err
}

// EachAuditEntry masks each exported entry.
func (m *Masked) EachAuditEntry(ctx context.Context, f dlq.AuditFilter, fn func(dlq.AuditEntry) error) error {
	return m.audit.EachAuditEntry(ctx, f, func(e dlq.AuditEntry) error {
		m.maskAudit(&e)
		return fn(e)
	})
}

// GetAuditEntry masks one entry.
func (m *Masked) GetAuditEntry(ctx context.Context, id int64) (dlq.AuditEntry, error) {
	e, err := m.audit.GetAuditEntry(ctx, id)
	m.maskAudit(&e)
	return e, err
}

// maskAudit masks the "before" and "after" arguments an edit-and-replay
// entry records. Only those: elsewhere in details a key like "token_id"
// names no secret, and hiding it would only blur the trail.
func (m *Masked) maskAudit(e *dlq.AuditEntry) {
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
			if masked, did := m.masker.Mask(v); did {
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

func (m *Masked) maskLetter(ctx context.Context, d *dlq.DeadLetter) {
	if d.ID != 0 && revealed(ctx, d.ID) {
		return
	}
	dlq.MaskLetter(m.masker, d)
}

type revealKey struct{}

// WithRevealed marks ctx as allowed to see letter id's real arguments.
// Only the reveal handler calls it, after writing the audit entry.
func WithRevealed(ctx context.Context, id int64) context.Context {
	return context.WithValue(ctx, revealKey{}, id)
}

func revealed(ctx context.Context, id int64) bool {
	got, ok := ctx.Value(revealKey{}).(int64)
	return ok && got == id
}

// Group masks the group's sample message as its letter's is.
func (m *Masked) Group(ctx context.Context, fingerprint string) (dlq.ErrorGroup, error) {
	g, err := m.groups.Group(ctx, fingerprint)
	g.SampleMessage = m.masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
	g.SampleArgs, g.SampleKwargs = nil, nil
	return g, err
}

// Incidents masks the sample messages and the template of each incident as
// the letters they come from are masked.
func (m *Masked) Incidents(ctx context.Context) ([]dlq.Incident, error) {
	incs, err := m.groups.Incidents(ctx)
	for i := range incs {
		m.maskIncident(&incs[i])
	}
	return incs, err
}

// IncidentOf masks the incident as Incidents does.
func (m *Masked) IncidentOf(ctx context.Context, groupID string) (dlq.Incident, bool, error) {
	inc, ok, err := m.groups.IncidentOf(ctx, groupID)
	m.maskIncident(&inc)
	return inc, ok, err
}

// maskIncident masks each group's sample message with its own letter's
// arguments, and the shared template with every group's: a value quoted
// in one task's message may stand in the template.
func (m *Masked) maskIncident(inc *dlq.Incident) {
	for i := range inc.Groups {
		g := &inc.Groups[i]
		g.SampleMessage = m.masker.MaskSample(g.SampleMessage, g.SampleArgs, g.SampleKwargs)
		inc.Template = m.masker.MaskSample(inc.Template, g.SampleArgs, g.SampleKwargs)
		g.SampleArgs, g.SampleKwargs = nil, nil
	}
}

// GroupVariables returns what varies between the group's newest letters,
// each value masked as the message it comes from is on its letter's page.
func (m *Masked) GroupVariables(ctx context.Context, fingerprint string) (dlq.GroupVariables, error) {
	return m.groups.GroupVariables(ctx, fingerprint, m.masker)
}

// GroupEdit reads what the page that merges and splits a group shows,
// masked with the console's policy.
func (m *Masked) GroupEdit(ctx context.Context, fingerprint string) (dlq.GroupEdit, error) {
	return m.groups.GroupForEdit(ctx, fingerprint, m.masker)
}

// CountDeadLetters counts the letters f matches.
func (m *Masked) CountDeadLetters(ctx context.Context, f dlq.Filter) (dlq.Count, error) {
	return m.letters.CountDeadLetters(ctx, f)
}

// CountNewer counts the letters f matches that came after afterID.
func (m *Masked) CountNewer(ctx context.Context, f dlq.Filter, afterID int64) (int64, error) {
	return m.letters.CountNewer(ctx, f, afterID)
}

// GroupInflow returns each group's hourly counts for the sparklines.
func (m *Masked) GroupInflow(ctx context.Context, fingerprints []string, now time.Time) (map[string][]int64, error) {
	return m.groups.GroupInflow(ctx, fingerprints, now)
}

// GroupHourly returns the group's letters per hour.
func (m *Masked) GroupHourly(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error) {
	return m.groups.GroupHourly(ctx, fingerprint, now)
}

// GroupMinutely returns the group's letters per minute.
func (m *Masked) GroupMinutely(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error) {
	return m.groups.GroupMinutely(ctx, fingerprint, now)
}

// GroupSurvivor returns the group a merged group id now means.
func (m *Masked) GroupSurvivor(ctx context.Context, id string) (string, bool, error) {
	return m.groups.GroupSurvivor(ctx, id)
}

// CountJobs counts the jobs f matches.
func (m *Masked) CountJobs(ctx context.Context, f dlq.JobFilter) (dlq.JobTotal, error) {
	return m.queue.CountJobs(ctx, f)
}

// JobQueues lists the queues that hold jobs.
func (m *Masked) JobQueues(ctx context.Context) ([]string, error) { return m.queue.JobQueues(ctx) }

// TaskNames lists the task names jobs have.
func (m *Masked) TaskNames(ctx context.Context) ([]string, error) { return m.queue.TaskNames(ctx) }

// Timings reads the tasks' timing summaries; they hold no secret.
func (m *Masked) Timings(ctx context.Context, task string, now time.Time) ([]dlq.TaskTimings, error) {
	return m.queue.Timings(ctx, task, now)
}

// SucceededKept says how many succeeded jobs are kept, and for how long.
func (m *Masked) SucceededKept(ctx context.Context) (dlq.SucceededKept, error) {
	return m.queue.SucceededKept(ctx)
}

// DeadLetterIDForJob returns the letter a job became, if it did.
func (m *Masked) DeadLetterIDForJob(ctx context.Context, jobID int64) (int64, error) {
	return m.queue.DeadLetterIDForJob(ctx, jobID)
}

// AuditLetters returns a page of the letters an audit entry names.
func (m *Masked) AuditLetters(ctx context.Context, id, after int64, limit int) ([]dlq.AuditLetter, int64, error) {
	return m.audit.AuditLetters(ctx, id, after, limit)
}

// ReplayOutcomes returns what became of the replays of the letters.
func (m *Masked) ReplayOutcomes(ctx context.Context, letterIDs []int64) (map[int64]dlq.ReplayOutcome, error) {
	return m.operations.ReplayOutcomes(ctx, letterIDs)
}

// Operation returns one bulk operation.
func (m *Masked) Operation(ctx context.Context, id int64) (dlq.Operation, error) {
	return m.operations.Operation(ctx, id)
}

// OperationReplays counts an operation's replays by outcome.
func (m *Masked) OperationReplays(ctx context.Context, opID int64) (dlq.ReplayCounts, error) {
	return m.operations.OperationReplays(ctx, opID)
}

// OperationSkips breaks down the letters an operation skipped.
func (m *Masked) OperationSkips(ctx context.Context, op dlq.Operation) (dlq.SkipCounts, error) {
	return m.operations.OperationSkips(ctx, op)
}

// ListOperations lists bulk operations, newest first.
func (m *Masked) ListOperations(ctx context.Context, f dlq.OperationListFilter) (dlq.OperationPage, error) {
	return m.operations.ListOperations(ctx, f)
}

// firstRunes keeps at most the first n runes of s: the job list shows the
// start of an error and links to the whole.
func firstRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Overview reads the overview's counts, charts and top tasks.
func (m *Masked) Overview(ctx context.Context) (dlq.Overview, error) { return m.letters.Overview(ctx) }

// WorkerStatuses lists the workers and their heartbeats.
func (m *Masked) WorkerStatuses(ctx context.Context) ([]dlq.WorkerStatus, error) {
	return m.letters.WorkerStatuses(ctx)
}

// PausesWithBacklog lists the open pauses and how much work waits on each.
func (m *Masked) PausesWithBacklog(ctx context.Context) ([]dlq.ActivePause, error) {
	return m.queue.PausesWithBacklog(ctx)
}

// Schedules masks each schedule's arguments: they are the code's, but may
// name a secret as a job's do.
func (m *Masked) Schedules(ctx context.Context) ([]dlq.Schedule, error) {
	list, err := m.queue.Schedules(ctx)
	for i := range list {
		list[i].Args, list[i].Kwargs, _ = m.masker.MaskArgs(list[i].Args, list[i].Kwargs)
	}
	return list, err
}

// TestRuns masks the last error of a letter's test jobs, which ran with
// its arguments.
func (m *Masked) TestRuns(ctx context.Context, id int64, limit int) ([]dlq.TestRun, error) {
	runs, err := m.operations.TestRuns(ctx, id, limit)
	for i := range runs {
		r := &runs[i]
		if r.LastError != nil {
			s := m.masker.MaskText(*r.LastError, r.Args, r.Kwargs)
			r.LastError = &s
		}
		r.Args, r.Kwargs = nil, nil
	}
	return runs, err
}
