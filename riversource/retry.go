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

// SendReplay retries the job of a letter a bulk replay queued (Retry). A
// resumed send (the console stopped mid-send) may have got through: when
// the job is no longer the discard the letter recorded, it is taken as
// sent, and followed, rather than refused.
func (s *Source) SendReplay(ctx context.Context, r dlq.SourceReplay) (dlq.SentReplay, error) {
	if r.Resumed {
		id, attempt, err := dlq.ParseRiverExternalID(r.ExternalID)
		if err != nil {
			return dlq.SentReplay{}, dlq.Errorf(dlq.EConflict, "%v", err)
		}
		job, err := s.client.JobGet(ctx, id)
		if err == nil && (job.State != rivertype.JobStateDiscarded || job.Attempt != attempt) {
			return dlq.SentReplay{JobID: id, Answer: "already retried: a send cut short got through"}, nil
		}
	}
	id, err := s.Retry(ctx, r.ExternalID)
	if err != nil {
		return dlq.SentReplay{}, err
	}
	return dlq.SentReplay{JobID: id}, nil
}

// FollowReplays reads the River jobs of sent replays, a JobList of their
// ids, and says where each is: completed is succeeded; discarded, or
// cancelled, is died again (River's discard is also imported as a new
// letter, replay_of the one replayed); running is running; any other state
// is still waiting to run. A job River no longer has is gone.
func (s *Source) FollowReplays(ctx context.Context, rs []dlq.SourceReplay) (map[int64]dlq.SourceReplayState, error) {
	byJob := make(map[int64][]int64, len(rs))
	ids := make([]int64, 0, len(rs))
	for _, r := range rs {
		if r.JobID == 0 {
			continue
		}
		if _, seen := byJob[r.JobID]; !seen {
			ids = append(ids, r.JobID)
		}
		byJob[r.JobID] = append(byJob[r.JobID], r.ID)
	}
	out := make(map[int64]dlq.SourceReplayState, len(rs))
	if len(ids) == 0 {
		return out, nil
	}
	res, err := s.client.JobList(ctx, river.NewJobListParams().IDs(ids...).First(len(ids)))
	if err != nil {
		return nil, fmt.Errorf("river source %s: follow %d replays: %w", s.cfg.Source, len(ids), err)
	}
	found := make(map[int64]dlq.SourceReplayState, len(res.Jobs))
	for _, job := range res.Jobs {
		found[job.ID] = replayState(job.State)
	}
	for jobID, replays := range byJob {
		st, ok := found[jobID]
		if !ok {
			st = dlq.SourceReplayGone
		}
		for _, id := range replays {
			out[id] = st
		}
	}
	return out, nil
}

// replayState is where a retried River job in state st has got to.
func replayState(st rivertype.JobState) dlq.SourceReplayState {
	switch st {
	case rivertype.JobStateCompleted:
		return dlq.SourceReplaySucceeded
	case rivertype.JobStateDiscarded, rivertype.JobStateCancelled:
		return dlq.SourceReplayDiedAgain
	case rivertype.JobStateRunning:
		return dlq.SourceReplayRunning
	}
	return dlq.SourceReplaySent
}
