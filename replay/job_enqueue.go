package replay

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// EnqueueRequest is a job an operator typed into the console: args and
// kwargs as typed (JSON text), checked as an edited replay's are.
type EnqueueRequest struct {
	Job          dlq.EnqueueParams
	Args, Kwargs string
	Actor        Actor
	Reason       string
	Key          string
}

// Enqueue enqueues one job by hand, audited. Operators and admins only;
// invalid JSON is an *EditError naming its line and column, an unknown
// task a validation error naming the registered tasks closest to it.
func (s *JobService) Enqueue(ctx context.Context, r EnqueueRequest) (dlq.EnqueueJobResult, error) {
	if err := mayActOnJobs(r.Actor); err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	if err := checkReason(r.Reason); err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	job := r.Job
	var err error
	if job.Args, err = typedJSON("args", r.Args, '[', "[]"); err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	if job.Kwargs, err = typedJSON("kwargs", r.Kwargs, '{', "{}"); err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	res, err := s.store.EnqueueJob(ctx, dlq.EnqueueJobParams{Job: job, Actor: r.Actor.Actor,
		Reason: strings.TrimSpace(r.Reason), Now: s.now(), Key: r.Key})
	if err != nil {
		return dlq.EnqueueJobResult{}, err
	}
	if !res.Repeated {
		s.logger.Info("enqueued job by hand", "job_id", res.JobID, "task", job.Task, "actor", r.Actor.Name)
	}
	return res, nil
}

// typedJSON is a JSON field as typed: empty means none (empty), anything
// else must be JSON opening with open.
func typedJSON(field, text string, open byte, empty string) (json.RawMessage, error) {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage(empty), nil
	}
	return parseEdit(field, &text, open)
}
