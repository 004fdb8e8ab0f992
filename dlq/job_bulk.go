package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Bulk actions on live jobs: run now or kill the jobs ticked on the list,
// or every job a filter matches. Unlike a bulk replay, which can take
// hours and is a durable operation, these are one guarded statement each
// over at most MaxBulkJobs jobs, done in the request's transaction with one
// audit entry. The selection is bounded by MaxID, the newest job that
// matched when the confirmation was shown, so jobs enqueued while the
// engineer reads it are not swept in.

// JobSelection is what a bulk action on jobs acts on: IDs, or every job
// Filter matches; either way only jobs in a state the action applies to,
// and, when MaxID is set, no job newer than it.
type JobSelection struct {
	IDs    []int64
	Filter *JobFilter
	MaxID  int64
}

func (s JobSelection) valid() error {
	if (len(s.IDs) == 0) == (s.Filter == nil) {
		return &ValidationError{Fields: map[string]string{"selection": "give either ids or a filter"}}
	}
	if len(s.IDs) > MaxBulkJobs {
		return &ValidationError{Fields: map[string]string{"ids": fmt.Sprintf("at most %d ids at once", MaxBulkJobs)}}
	}
	return nil
}

// where is the selection's condition for action a, its values as $n
// parameters after args.
func (s JobSelection) where(a JobAction, args []any) (string, []any) {
	states := make([]string, 0, 2)
	for _, st := range a.eligible() {
		if s.Filter == nil || s.Filter.State == "" || s.Filter.State == st {
			states = append(states, string(st))
		}
	}
	args = append(args, pq.Array(states))
	conds := []string{fmt.Sprintf("state = ANY($%d)", len(args))}
	if s.Filter != nil {
		f := *s.Filter
		f.State = ""
		conds, args = f.conds(conds, args)
	} else {
		args = append(args, pq.Array(s.IDs))
		conds = append(conds, fmt.Sprintf("id = ANY($%d)", len(args)))
	}
	if s.MaxID > 0 {
		args = append(args, s.MaxID)
		conds = append(conds, fmt.Sprintf("id <= $%d", len(args)))
	}
	if a == JobRunNow {
		conds = append(conds, "run_at > now()")
	}
	return where(conds), args
}

// JobPreview is what a bulk action would touch: how many jobs (Capped when
// over MaxBulkJobs), the newest one's id as the bound, and a sample.
type JobPreview struct {
	Matched int64         `db:"matched"`
	Capped  bool          `db:"-"`
	MaxID   int64         `db:"max_id"`
	Sample  []JobListItem `db:"-"`
}

// PreviewJobs counts what action a would change in sel, without changing
// anything.
func (s *Store) PreviewJobs(ctx context.Context, a JobAction, sel JobSelection, sampleSize int) (JobPreview, error) {
	if err := sel.valid(); err != nil {
		return JobPreview{}, err
	}
	cond, args := sel.where(a, nil)
	var p JobPreview
	err := s.db.GetContext(ctx, &p, fmt.Sprintf(`SELECT count(*) AS matched, COALESCE(max(id), 0) AS max_id
		FROM (SELECT id FROM jobs WHERE %s ORDER BY id DESC LIMIT %d) x`, cond, MaxBulkJobs+1), args...)
	if err != nil {
		return JobPreview{}, fmt.Errorf("preview jobs: %w", translate(err))
	}
	if p.Matched > MaxBulkJobs {
		p.Matched, p.Capped = MaxBulkJobs, true
	}
	if sampleSize > 0 {
		err = s.db.SelectContext(ctx, &p.Sample, fmt.Sprintf(`SELECT %s FROM jobs WHERE %s ORDER BY id DESC LIMIT %d`,
			jobListColumns, cond, sampleSize), args...)
		if err != nil {
			return JobPreview{}, fmt.Errorf("preview jobs: %w", translate(err))
		}
	}
	return p, nil
}

// BulkJobParams asks for one action on many jobs.
type BulkJobParams struct {
	Action    JobAction
	Selection JobSelection
	Actor     Actor
	Reason    string
	Now       time.Time
	Key       string
	// Confirm, when set, is given the number of jobs the action will
	// change, counted under the rows' locks; an error from it stops the
	// action (a typed confirmation that does not match).
	Confirm func(n int64) error
}

// BulkJobResult is what a bulk action did. Skipped counts the jobs that
// matched when counted but had changed (claimed, finished) by the time
// they were locked.
type BulkJobResult struct {
	Action   JobAction `json:"action"`
	Matched  int64     `json:"matched"`
	Changed  int64     `json:"changed"`
	Skipped  int64     `json:"skipped"`
	AuditID  int64     `json:"audit_event_id"`
	Repeated bool      `json:"-"`
}

// ActOnJobs applies run now or kill to every job of the selection in one
// transaction with one audit entry. The jobs are locked first, skipping
// those a worker is claiming (SKIP LOCKED): those are reported skipped.
func (s *Store) ActOnJobs(ctx context.Context, p BulkJobParams) (BulkJobResult, error) {
	if p.Action != JobRunNow && p.Action != JobKill {
		return BulkJobResult{}, &ValidationError{Fields: map[string]string{"action": "bulk actions are run_now and kill"}}
	}
	if err := p.Selection.valid(); err != nil {
		return BulkJobResult{}, err
	}
	var res BulkJobResult
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		hash := requestHash("bulk", p.Action, p.Selection.IDs, p.Selection.Filter, p.Selection.MaxID, p.Reason)
		repeated, err := onceWithKey(ctx, tx, p.Key, p.Actor, p.Action.auditAction(), hash, &res, func() error {
			var err error
			res, err = s.actOnJobsInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return BulkJobResult{}, fmt.Errorf("bulk %s: %w", p.Action, err)
	}
	return res, nil
}

func (s *Store) actOnJobsInTx(ctx context.Context, tx *sqlx.Tx, p BulkJobParams) (BulkJobResult, error) {
	cond, args := p.Selection.where(p.Action, nil)
	var matched int64
	if err := tx.GetContext(ctx, &matched, fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM jobs WHERE %s LIMIT %d) x`,
		cond, MaxBulkJobs+1), args...); err != nil {
		return BulkJobResult{}, fmt.Errorf("count jobs: %w", translate(err))
	}
	if matched > MaxBulkJobs {
		return BulkJobResult{}, &ValidationError{Fields: map[string]string{"selection": fmt.Sprintf(
			"matches more than %d jobs; narrow the filter (by queue or task) and act in parts", MaxBulkJobs)}}
	}
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, fmt.Sprintf(`SELECT id FROM jobs WHERE %s ORDER BY id FOR UPDATE SKIP LOCKED`, cond),
		args...); err != nil {
		return BulkJobResult{}, fmt.Errorf("lock jobs: %w", translate(err))
	}
	if p.Confirm != nil {
		if err := p.Confirm(matched); err != nil {
			return BulkJobResult{}, err
		}
	}
	res := BulkJobResult{Action: p.Action, Matched: matched}
	counts := map[string]int64{}
	if len(ids) > 0 {
		switch p.Action {
		case JobRunNow:
			n, err := runNowInTx(ctx, tx, ids)
			if err != nil {
				return BulkJobResult{}, err
			}
			res.Changed, counts["run_now"] = n, n
		case JobKill:
			letters, err := s.killInTx(ctx, tx, ids, killEntry(p.Actor.Name, p.Reason, p.Now))
			if err != nil {
				return BulkJobResult{}, err
			}
			res.Changed, counts["killed"] = int64(len(letters)), int64(len(letters))
		}
	}
	res.Skipped = max(0, matched-res.Changed)
	counts["skipped"] = res.Skipped
	details := map[string]any{"bulk": true}
	var filter *json.RawMessage
	if p.Selection.Filter != nil {
		raw := mustJSON(p.Selection.Filter.FirstPage().Values())
		filter = &raw
	} else {
		details["job_ids"] = p.Selection.IDs
	}
	var maxID *int64
	if p.Selection.MaxID > 0 {
		maxID = &p.Selection.MaxID
	}
	auditID, err := appendAudit(ctx, tx, AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: p.Action.auditAction(), Filter: filter, MaxID: maxID,
		Counts: mustJSON(counts), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: mustJSON(details),
	})
	if err != nil {
		return BulkJobResult{}, err
	}
	res.AuditID = auditID
	return res, nil
}
