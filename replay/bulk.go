package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redrive/redrive/dlq"
)

// BulkRequest asks for a bulk replay or discard.
type BulkRequest struct {
	Kind      dlq.OperationKind
	Selection dlq.Selection
	Actor     Actor
	Reason    string
	// RatePerSecond paces a replay (0: no pacing); Canary replays this many
	// first and waits for a release (0: no canary).
	RatePerSecond float64
	Canary        int
	// DiedAgainPercent is the died-again guard (0: none): more than this
	// share of the first dlq.GuardSample settled replays dying again
	// pauses the operation.
	DiedAgainPercent float64
	// Target sends a replay's jobs to another queue, from a start time,
	// with a new maximum of attempts (zero: as each letter ran, now).
	Target dlq.ReplayTarget
	// DryRun answers the counts and changes nothing.
	DryRun bool
	// Typed is what the engineer typed to confirm; the console requires it
	// to equal the number of pending letters the selection holds, counted
	// here when the operation is created, when that is over
	// TypedConfirmationOver. The API leaves RequireTyped false.
	RequireTyped bool
	Typed        string
	Key          string
}

// Limits on pacing and canaries. The slowest pace is one letter every 100
// seconds: slower than that is a schedule, not a pace, and a rate near
// zero would put run_at beyond what an interval can hold.
const (
	MinRatePerSecond = 0.01
	MaxRatePerSecond = 100_000
	MaxCanary        = 1000
)

// Preview shows what a bulk action would touch, with MaxID fixed so that
// the action confirmed acts on exactly these letters and not on later ones,
// and which open operations already cover some of them (a warning only:
// starting another operation over the same letters is allowed, and the
// guarded batches never act on a letter twice).
func (s *Service) Preview(ctx context.Context, sel dlq.Selection, sampleSize int) (dlq.Preview, error) {
	p, err := s.store.PreviewSelection(ctx, sel, sampleSize)
	if err != nil || p.Matched == 0 {
		return p, err
	}
	bounded := sel
	bounded.MaxID = p.MaxID
	if p.Overlaps, err = s.store.SelectionOverlaps(ctx, bounded); err != nil {
		return dlq.Preview{}, err
	}
	return p, nil
}

// StartBulk checks policy and records the operation; the Runner carries it
// out in the background. A dry run returns the preview counts as a
// not-persisted operation in state done.
func (s *Service) StartBulk(ctx context.Context, r BulkRequest) (dlq.Operation, error) {
	if err := mayAct(r.Actor); err != nil {
		return dlq.Operation{}, err
	}
	if err := s.validateBulk(r); err != nil {
		return dlq.Operation{}, err
	}
	if r.DryRun {
		return s.dryRunBulk(ctx, r)
	}
	op, err := s.store.CreateOperation(ctx, dlq.OperationParams{
		Kind: r.Kind, Selection: r.Selection, Actor: r.Actor.Actor, Reason: strings.TrimSpace(r.Reason),
		RatePerSecond: r.RatePerSecond, Canary: r.Canary, DiedAgainPercent: r.DiedAgainPercent, Target: r.Target, Now: s.now(), Key: r.Key,
		Confirm: typedConfirmation(r),
	})
	if err != nil {
		return dlq.Operation{}, err
	}
	s.logger.Info("bulk operation started", "operation_id", op.ID, "kind", op.Kind, "matched", op.Matched, "actor", r.Actor.Name)
	s.wake()
	return op, nil
}

// validateBulk checks a bulk request's bounds and reason before anything
// is read, and names every problem at once so that a form can show them
// all beside their fields.
func (s *Service) validateBulk(r BulkRequest) error {
	problems := pacingProblems(r)
	if r.Kind == dlq.OpDiscard && !r.Target.IsZero() {
		problems["kind"] = "a queue, a start time and attempts apply to replays only"
	}
	r.Target.Problems(s.now(), problems)
	if msg := reasonProblem(r); msg != "" {
		problems["reason"] = msg
	}
	if len(problems) > 0 {
		return &dlq.ValidationError{Fields: problems}
	}
	return nil
}

// pacingProblems checks the knobs that shape how a replay is released
// (rate, canary, died-again guard), which a discard must leave unset,
// keyed by form field.
func pacingProblems(r BulkRequest) map[string]string {
	problems := map[string]string{}
	// Written as "not within" so that NaN (which a form can spell) is refused too.
	if r.RatePerSecond != 0 && !(r.RatePerSecond >= MinRatePerSecond && r.RatePerSecond <= MaxRatePerSecond) {
		problems["rate_per_second"] = fmt.Sprintf("must be between %g and %d letters a second (or 0: no pacing)", MinRatePerSecond, MaxRatePerSecond)
	}
	if r.Canary < 0 || r.Canary > MaxCanary {
		problems["canary"] = fmt.Sprintf("must be between 0 and %d", MaxCanary)
	}
	if r.Kind == dlq.OpDiscard && (r.RatePerSecond > 0 || r.Canary > 0 || r.DiedAgainPercent != 0) {
		problems["kind"] = "pacing, canaries and the died-again guard apply to replays only"
	}
	if r.DiedAgainPercent != 0 && !(r.DiedAgainPercent > 0 && r.DiedAgainPercent < 100) {
		problems["died_again_percent"] = "must be a percentage between 0 and 100, such as 20 (or 0: no guard)"
	}
	return problems
}

// reasonProblem says what is wrong with the reason ("" when nothing): a
// discard cannot be undone by replaying, so it must say why, and no reason
// may be longer than checkReason allows. A too long reason's message wins.
func reasonProblem(r BulkRequest) string {
	problem := ""
	if r.Kind == dlq.OpDiscard && strings.TrimSpace(r.Reason) == "" {
		problem = "a reason is required to discard"
	}
	var reasonErr *dlq.ValidationError
	if errors.As(checkReason(r.Reason), &reasonErr) {
		problem = reasonErr.Fields["reason"]
	}
	return problem
}

// dryRunBulk answers what the request would touch as an operation that is
// never stored, so that a dry run and a real one have the same shape.
func (s *Service) dryRunBulk(ctx context.Context, r BulkRequest) (dlq.Operation, error) {
	p, err := s.store.PreviewSelection(ctx, r.Selection, 0)
	if err != nil {
		return dlq.Operation{}, err
	}
	return dlq.Operation{Kind: r.Kind, State: dlq.OpDone, Matched: p.Matched, Skipped: p.Other, MaxID: p.MaxID}, nil
}

// typedConfirmation returns the check the store runs on the pending count
// it finds while creating the operation (nil when no typed confirmation is
// required): the count is only known inside that transaction. Separators
// an engineer may type in a number (1,000 or 1 000 or 1_000) are ignored.
func typedConfirmation(r BulkRequest) func(pending int64) error {
	if !r.RequireTyped {
		return nil
	}
	typed := strings.NewReplacer(",", "", " ", "", "_", "").Replace(strings.TrimSpace(r.Typed))
	return func(pending int64) error {
		if pending > TypedConfirmationOver && typed != strconv.FormatInt(pending, 10) {
			return &ConfirmError{Expected: pending}
		}
		return nil
	}
}

// Cancel stops a bulk operation.
// key, when set, makes the cancel happen once (dlq.ChangeOperationParams).
func (s *Service) Cancel(ctx context.Context, id int64, a Actor, key string) (dlq.Operation, error) {
	if err := mayAct(a); err != nil {
		return dlq.Operation{}, err
	}
	return s.store.CancelOperation(ctx, dlq.ChangeOperationParams{ID: id, Actor: a.Actor, Now: s.now(), Key: key})
}

// ReleaseCanary lets an operation continue after its canary, also after a
// canary that died again (release anyway); key as for Cancel.
func (s *Service) ReleaseCanary(ctx context.Context, id int64, a Actor, key string) (dlq.Operation, error) {
	return s.changeAndWake(ctx, id, a, key, s.store.ReleaseCanary)
}

// Resume lets an operation the died-again guard paused release the rest;
// key as for Cancel.
func (s *Service) Resume(ctx context.Context, id int64, a Actor, key string) (dlq.Operation, error) {
	return s.changeAndWake(ctx, id, a, key, s.store.ResumeOperation)
}

// StopFollowing ends a settling operation before all its replays settled;
// key as for Cancel.
func (s *Service) StopFollowing(ctx context.Context, id int64, a Actor, key string) (dlq.Operation, error) {
	if err := mayAct(a); err != nil {
		return dlq.Operation{}, err
	}
	return s.store.StopFollowing(ctx, dlq.ChangeOperationParams{ID: id, Actor: a.Actor, Now: s.now(), Key: key})
}

func (s *Service) changeAndWake(ctx context.Context, id int64, a Actor, key string,
	change func(context.Context, dlq.ChangeOperationParams) (dlq.Operation, error)) (dlq.Operation, error) {
	if err := mayAct(a); err != nil {
		return dlq.Operation{}, err
	}
	op, err := change(ctx, dlq.ChangeOperationParams{ID: id, Actor: a.Actor, Now: s.now(), Key: key})
	if err == nil {
		s.wake()
	}
	return op, err
}

// Wait follows an operation until it finishes, waits for a decision (at a
// canary, a dead canary, the guard), or timeout passes, and returns its
// latest state. A settling operation is not finished: Wait goes on.
func (s *Service) Wait(ctx context.Context, id int64, timeout time.Duration) (dlq.Operation, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		op, err := s.store.Operation(ctx, id)
		if err != nil || op.State.Finished() || op.State.Waiting() {
			return op, err
		}
		select {
		case <-ctx.Done():
			return op, nil
		case <-deadline.C:
			return op, nil
		case <-tick.C:
		}
	}
}

// IsForbidden reports whether err is a policy refusal.
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }
