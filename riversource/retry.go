package riversource

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/redrive/redrive/dlq"
)

// Retry runs the job a letter of this source names (its external id) again
// in River, through River's own JobRetry: the same job id, made available
// at once, with one more attempt when it had used them all. It first checks
// that the job is still the discard the letter recorded, so that a job
// already retried (in River UI, or by another replay) does not run twice;
// anything River will not retry is an EConflict error saying why.
func (s *Source) Retry(ctx context.Context, externalID string) (int64, error) {
	id, attempt, err := dlq.ParseRiverExternalID(externalID)
	if err != nil {
		return 0, dlq.Errorf(dlq.EConflict, "%v", err)
	}
	job, err := s.client.JobGet(ctx, id)
	switch {
	case errors.Is(err, river.ErrNotFound):
		return 0, dlq.Errorf(dlq.EConflict, "River no longer has job %d (its cleaner deletes discarded jobs after a while, 7 days by default): there is nothing to retry", id)
	case err != nil:
		return 0, fmt.Errorf("river source %s: job %d: %w", s.cfg.Source, id, err)
	case job.State != rivertype.JobStateDiscarded || job.Attempt != attempt:
		return 0, dlq.Errorf(dlq.EConflict, "River job %d was retried since it was discarded at attempt %d (it is now %s at attempt %d): replaying it would run it once more",
			id, attempt, job.State, job.Attempt)
	}
	if _, err := s.client.JobRetry(ctx, id); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return 0, dlq.Errorf(dlq.EConflict, "River refused to retry job %d: another job holds its unique key (%s)", id, pgErr.ConstraintName)
		}
		return 0, fmt.Errorf("river source %s: retry job %d: %w", s.cfg.Source, id, err)
	}
	return id, nil
}

// Delete deletes the job a letter of this source names in River, through
// River's own JobDelete, when the job is still the discard the letter
// recorded. A job River no longer has is already deleted; a job retried
// since (running, or waiting to run again) is kept, and the deletion
// refused with the reason, since it is no longer the failure discarded.
func (s *Source) Delete(ctx context.Context, externalID string) error {
	id, attempt, err := dlq.ParseRiverExternalID(externalID)
	if err != nil {
		return dlq.Errorf(dlq.EConflict, "%v", err)
	}
	job, err := s.client.JobGet(ctx, id)
	switch {
	case errors.Is(err, river.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("river source %s: job %d: %w", s.cfg.Source, id, err)
	case job.State != rivertype.JobStateDiscarded || job.Attempt != attempt:
		return dlq.Errorf(dlq.EConflict, "River job %d was retried since it was discarded at attempt %d (it is now %s at attempt %d): it is kept in River",
			id, attempt, job.State, job.Attempt)
	}
	if _, err := s.client.JobDelete(ctx, id); err != nil && !errors.Is(err, river.ErrNotFound) {
		return fmt.Errorf("river source %s: delete job %d: %w", s.cfg.Source, id, err)
	}
	return nil
}
