package operations

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/audit"
	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/queue"
)

// jobSelectionWhere is the selection's condition for action a, its values as $n
// parameters after args.
func jobSelectionWhere(s dlq.JobSelection, a dlq.JobAction, args []any) (string, []any) {
	states := make([]string, 0, 2)
	for _, st := range a.Eligible() {
		if s.Filter == nil || s.Filter.State == "" || s.Filter.State == st {
			states = append(states, string(st))
		}
	}
	args = append(args, pq.Array(states))
	conds := []string{fmt.Sprintf("state = ANY($%d)", len(args))}
	if s.Filter != nil {
		f := *s.Filter
		f.State = ""
		conds, args = queue.JobConds(f, conds, args)
	} else {
		args = append(args, pq.Array(s.IDs))
		conds = append(conds, fmt.Sprintf("id = ANY($%d)", len(args)))
	}
	if s.MaxID > 0 {
		args = append(args, s.MaxID)
		conds = append(conds, fmt.Sprintf("id <= $%d", len(args)))
	}
	if a == dlq.JobRunNow {
		conds = append(conds, "run_at > now()")
	}
	return queue.Where(conds), args
}

// PreviewJobs counts what action a would change in sel, without changing
// anything.
func (s *Store) PreviewJobs(ctx context.Context, a dlq.JobAction, sel dlq.JobSelection, sampleSize int) (dlq.JobPreview, error) {
	if err := sel.Validate(); err != nil {
		return dlq.JobPreview{}, err
	}
	cond, args := jobSelectionWhere(sel, a, nil)
	var p dlq.JobPreview
	err := s.db.GetContext(ctx, &p, fmt.Sprintf(`SELECT count(*) AS matched, COALESCE(max(id), 0) AS max_id
		FROM (SELECT id FROM jobs WHERE %s ORDER BY id DESC LIMIT %d) x`, cond, dlq.MaxBulkJobs+1), args...)
	if err != nil {
		return dlq.JobPreview{}, fmt.Errorf("preview jobs: %w", postgres.Translate(err))
	}
	if p.Matched > dlq.MaxBulkJobs {
		p.Matched, p.Capped = dlq.MaxBulkJobs, true
	}
	if sampleSize > 0 {
		err = s.db.SelectContext(ctx, &p.Sample, fmt.Sprintf(`SELECT %s FROM jobs WHERE %s ORDER BY id DESC LIMIT %d`,
			queue.JobListColumns, cond, sampleSize), args...)
		if err != nil {
			return dlq.JobPreview{}, fmt.Errorf("preview jobs: %w", postgres.Translate(err))
		}
	}
	return p, nil
}

// ActOnJobs applies run now or kill to every job of the selection in one
// transaction with one audit entry. The jobs are locked first, skipping
// those a worker is claiming (SKIP LOCKED): those are reported skipped.
func (s *Store) ActOnJobs(ctx context.Context, p dlq.BulkJobParams) (dlq.BulkJobResult, error) {
	if p.Action != dlq.JobRunNow && p.Action != dlq.JobKill {
		return dlq.BulkJobResult{}, &dlq.ValidationError{Fields: map[string]string{"action": "bulk actions are run_now and kill"}}
	}
	if err := p.Selection.Validate(); err != nil {
		return dlq.BulkJobResult{}, err
	}
	var res dlq.BulkJobResult
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		hash := dlq.RequestHash("bulk", p.Action, p.Selection.IDs, p.Selection.Filter, p.Selection.MaxID, p.Reason)
		repeated, err := audit.OnceWithKey(ctx, tx, p.Key, p.Actor, p.Action.AuditAction(), hash, &res, func() error {
			var err error
			res, err = s.actOnJobsInTx(ctx, tx, p)
			return err
		})
		res.Repeated = repeated
		return err
	})
	if err != nil {
		return dlq.BulkJobResult{}, fmt.Errorf("bulk %s: %w", p.Action, err)
	}
	return res, nil
}

func (s *Store) actOnJobsInTx(ctx context.Context, tx *sqlx.Tx, p dlq.BulkJobParams) (dlq.BulkJobResult, error) {
	cond, args := jobSelectionWhere(p.Selection, p.Action, nil)
	var matched int64
	if err := tx.GetContext(ctx, &matched, fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM jobs WHERE %s LIMIT %d) x`,
		cond, dlq.MaxBulkJobs+1), args...); err != nil {
		return dlq.BulkJobResult{}, fmt.Errorf("count jobs: %w", postgres.Translate(err))
	}
	if matched > dlq.MaxBulkJobs {
		return dlq.BulkJobResult{}, &dlq.ValidationError{Fields: map[string]string{"selection": fmt.Sprintf(
			"matches more than %d jobs; narrow the filter (by queue or task) and act in parts", dlq.MaxBulkJobs)}}
	}
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, fmt.Sprintf(`SELECT id FROM jobs WHERE %s ORDER BY id FOR UPDATE SKIP LOCKED`, cond),
		args...); err != nil {
		return dlq.BulkJobResult{}, fmt.Errorf("lock jobs: %w", postgres.Translate(err))
	}
	if p.Confirm != nil {
		if err := p.Confirm(matched); err != nil {
			return dlq.BulkJobResult{}, err
		}
	}
	res := dlq.BulkJobResult{Action: p.Action, Matched: matched}
	counts := map[string]int64{}
	if len(ids) > 0 {
		switch p.Action {
		case dlq.JobRunNow:
			n, err := runNowInTx(ctx, tx, ids)
			if err != nil {
				return dlq.BulkJobResult{}, err
			}
			res.Changed, counts["run_now"] = n, n
		case dlq.JobKill:
			letters, err := s.killInTx(ctx, tx, ids, killEntry(p.Actor.Name, p.Reason, p.Now))
			if err != nil {
				return dlq.BulkJobResult{}, err
			}
			res.Changed, counts["killed"] = int64(len(letters)), int64(len(letters))
		}
	}
	res.Skipped = max(0, matched-res.Changed)
	counts["skipped"] = res.Skipped
	details := map[string]any{"bulk": true}
	var filter *json.RawMessage
	if p.Selection.Filter != nil {
		raw := audit.MustJSON(p.Selection.Filter.FirstPage().Values())
		filter = &raw
	} else {
		details["job_ids"] = p.Selection.IDs
	}
	var maxID *int64
	if p.Selection.MaxID > 0 {
		maxID = &p.Selection.MaxID
	}
	auditID, err := audit.AppendAudit(ctx, tx, dlq.AuditEntry{
		At: p.Now, Actor: p.Actor.Name, Action: p.Action.AuditAction(), Filter: filter, MaxID: maxID,
		Counts: audit.MustJSON(counts), Reason: p.Reason,
		RequestID: p.Actor.RequestID, RemoteAddr: p.Actor.RemoteAddr, UserAgent: p.Actor.UserAgent,
		Details: audit.MustJSON(details),
	})
	if err != nil {
		return dlq.BulkJobResult{}, err
	}
	res.AuditID = auditID
	return res, nil
}
