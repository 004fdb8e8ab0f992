package replay

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
)

// JobStore is what JobService needs from the store's operations room.
type JobStore interface {
	ActOnJob(ctx context.Context, p dlq.JobActionParams) (dlq.JobActionResult, error)
	ActOnJobs(ctx context.Context, p dlq.BulkJobParams) (dlq.BulkJobResult, error)
	PreviewJobs(ctx context.Context, a dlq.JobAction, sel dlq.JobSelection, sampleSize int) (dlq.JobPreview, error)
	EnqueueJob(ctx context.Context, p dlq.EnqueueJobParams) (dlq.EnqueueJobResult, error)
}

// JobService applies policy to actions on live jobs (run now, kill,
// cancel): who may act, the reason's bounds, and the typed confirmation of
// a large bulk action; dlq does the guarded change.
type JobService struct {
	store  JobStore
	logger *slog.Logger
	now    func() time.Time
}

// NewJobService returns a JobService; logger and now default to a discard
// logger and time.Now.
func NewJobService(store JobStore, logger *slog.Logger, now func() time.Time) *JobService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &JobService{store: store, logger: logger, now: now}
}

// JobRequest asks for one action on one job.
type JobRequest struct {
	Action      dlq.JobAction
	ID          int64
	SeenState   dlq.State
	SeenAttempt *int
	Actor       Actor
	Reason      string
	Retry       bool
	Key         string
}

func mayActOnJobs(a Actor) error {
	if !a.Role.CanAct() {
		return dlq.Errorf(dlq.EForbidden, "You may not do this: the %s role may not change jobs", a.Role)
	}
	return nil
}

// Act applies one action to one job. A kill needs a reason (it is the
// letter's only explanation); every reason is bounded.
func (s *JobService) Act(ctx context.Context, r JobRequest) (dlq.JobActionResult, error) {
	if err := mayActOnJobs(r.Actor); err != nil {
		return dlq.JobActionResult{}, err
	}
	if err := checkJobRequest(r.Action, r.Reason, r.Retry); err != nil {
		return dlq.JobActionResult{}, err
	}
	res, err := s.store.ActOnJob(ctx, dlq.JobActionParams{Action: r.Action, ID: r.ID, SeenState: r.SeenState,
		SeenAttempt: r.SeenAttempt, Actor: r.Actor.Actor, Reason: strings.TrimSpace(r.Reason), Retry: r.Retry,
		Now: s.now(), Key: r.Key})
	if err != nil {
		return dlq.JobActionResult{}, err
	}
	if !res.Repeated {
		s.logger.Info("acted on job", "action", r.Action, "job_id", r.ID, "actor", r.Actor.Name)
	}
	return res, nil
}

func checkJobRequest(a dlq.JobAction, reason string, retry bool) error {
	problems := map[string]string{}
	if !a.Valid() {
		problems["action"] = "must be run_now, kill or cancel"
	}
	if retry && a != dlq.JobCancel {
		problems["retry"] = "applies to cancel only"
	}
	if a == dlq.JobKill && strings.TrimSpace(reason) == "" {
		problems["reason"] = "a reason is required to kill: the next person will ask why the job was dropped"
	}
	if err := checkReason(reason); err != nil {
		problems["reason"] = err.(*dlq.ValidationError).Fields["reason"]
	}
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: problems}
	}
	return nil
}

// BulkJobRequest asks for run now or kill on many jobs.
type BulkJobRequest struct {
	Action    dlq.JobAction
	Selection dlq.JobSelection
	Actor     Actor
	Reason    string
	// RequireTyped and Typed: as in BulkRequest, the console asks for the
	// number of jobs to be typed when it is over TypedConfirmationOver.
	RequireTyped bool
	Typed        string
	Key          string
}

// PreviewJobs shows what a bulk action would change, fixing MaxID.
func (s *JobService) PreviewJobs(ctx context.Context, a dlq.JobAction, sel dlq.JobSelection, sampleSize int) (dlq.JobPreview, error) {
	return s.store.PreviewJobs(ctx, a, sel, sampleSize)
}

// ActOnMany applies a bulk action.
func (s *JobService) ActOnMany(ctx context.Context, r BulkJobRequest) (dlq.BulkJobResult, error) {
	if err := mayActOnJobs(r.Actor); err != nil {
		return dlq.BulkJobResult{}, err
	}
	if r.Action != dlq.JobRunNow && r.Action != dlq.JobKill {
		return dlq.BulkJobResult{}, &dlq.ValidationError{Fields: map[string]string{"action": "bulk actions are run_now and kill"}}
	}
	if err := checkJobRequest(r.Action, r.Reason, false); err != nil {
		return dlq.BulkJobResult{}, err
	}
	var confirm func(int64) error
	if r.RequireTyped {
		typed := strings.NewReplacer(",", "", " ", "", "_", "").Replace(strings.TrimSpace(r.Typed))
		confirm = func(n int64) error {
			if n > TypedConfirmationOver && typed != strconv.FormatInt(n, 10) {
				return &ConfirmError{Expected: n, Things: "jobs"}
			}
			return nil
		}
	}
	res, err := s.store.ActOnJobs(ctx, dlq.BulkJobParams{Action: r.Action, Selection: r.Selection, Actor: r.Actor.Actor,
		Reason: strings.TrimSpace(r.Reason), Now: s.now(), Key: r.Key, Confirm: confirm})
	if err != nil {
		return dlq.BulkJobResult{}, err
	}
	if !res.Repeated {
		s.logger.Info("acted on jobs", "action", r.Action, "changed", res.Changed, "skipped", res.Skipped, "actor", r.Actor.Name)
	}
	return res, nil
}
