package replay

import (
	"context"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// TestRunRequest asks for one test job from a letter's arguments, edited
// or not, where Target says (the letter's queue unless given; one attempt
// unless given).
type TestRunRequest struct {
	ID     int64
	Actor  Actor
	Args   *string // edited args as typed, or nil to keep the letter's
	Kwargs *string // edited kwargs as typed, or nil to keep the letter's
	Target dlq.ReplayTarget
	Reason string
	Key    string
}

// TestRun enqueues one test job for a letter, which stays as it is: a
// trial before a replay, not a replay. Operators and admins only; edited
// arguments are checked as an edit and replay's are (*EditError).
func (s *Service) TestRun(ctx context.Context, r TestRunRequest) (dlq.TestRunResult, error) {
	if err := mayAct(r.Actor); err != nil {
		return dlq.TestRunResult{}, err
	}
	if err := checkReason(r.Reason); err != nil {
		return dlq.TestRunResult{}, err
	}
	p := dlq.TestRunParams{LetterID: r.ID, Actor: r.Actor.Actor, Reason: strings.TrimSpace(r.Reason), Target: r.Target, Now: s.now(), Key: r.Key}
	var err error
	if p.Args, err = parseEdit("args", r.Args, '['); err != nil {
		return dlq.TestRunResult{}, err
	}
	if p.Kwargs, err = parseEdit("kwargs", r.Kwargs, '{'); err != nil {
		return dlq.TestRunResult{}, err
	}
	res, err := s.store.TestRunDeadLetter(ctx, p)
	if err != nil {
		return dlq.TestRunResult{}, err
	}
	if !res.Repeated {
		s.logger.Info("test run of dead letter", "dead_letter_id", r.ID, "job_id", res.JobID, "actor", r.Actor.Name)
	}
	return res, nil
}
