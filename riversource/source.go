// Package riversource makes a River queue (github.com/riverqueue/river) a
// source of Redrive's letters: it imports the jobs River discarded, as
// they are discarded, through River's own client.
//
// The importer reads River's discarded jobs in the order River finalised
// them (River's JobList, ordered by finalized_at, which River's index on
// (state, finalized_at) serves), a page at a time from a cursor kept in
// Redrive's database; each page and the cursor's move commit together. A
// job is passed only once it is Settle old: River stamps finalized_at
// before the transaction that discards the job commits, so a job stamped
// earlier may become visible after a later one was read. A sweep re-reads
// the last Resweep of discards now and then and takes in what the cursor
// passed by; importing is idempotent on the letter's identity (job id and
// attempt), so a job read twice is one letter.
package riversource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/redrive/redrive/dlq"
)

// Store keeps the letters and the cursor (store/sources). Import returns
// dlq.ErrImportCursorMoved when another console moved the cursor first.
type Store interface {
	ImportCursor(ctx context.Context, source string) (string, error)
	Import(ctx context.Context, source string, letters []dlq.IngestLetter, from, to string) (int, error)
	ImportChecked(ctx context.Context, source string) error
	ImportFailed(ctx context.Context, source, problem string) error
	PriorLetters(ctx context.Context, source string, externalIDs []string) (map[string]int64, error)
}

// Config is an importer's source and pace.
type Config struct {
	// Source is the source's name (--sources NAME=river).
	Source string
	// Pool connects to River's database.
	Pool   *pgxpool.Pool
	Store  Store
	Logger *slog.Logger
	// Every is how often the importer looks for new discards once it has
	// caught up; default 250 ms.
	Every time.Duration
	// Settle is how old a discard must be before the cursor passes it;
	// default 1 s.
	Settle time.Duration
	// Page is how many jobs one read takes; default 1,000.
	Page int
	// Resweep is how far back the sweep re-reads, every SweepEvery;
	// defaults 15 and 1 minute.
	Resweep, SweepEvery time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Source is one River queue as a source of letters: it imports the jobs
// River discarded (Run) and retries one when its letter is replayed
// (Retry).
type Source struct {
	cfg    Config
	client *river.Client[pgx.Tx]
}

// New returns the River source in cfg.Pool's database. Its River client
// only reads and retries jobs: it works none.
func New(cfg Config) (*Source, error) {
	cfg.Every = cmp.Or(cfg.Every, 250*time.Millisecond)
	cfg.Settle = cmp.Or(cfg.Settle, time.Second)
	cfg.Page = cmp.Or(cfg.Page, 1000)
	cfg.Resweep = cmp.Or(cfg.Resweep, 15*time.Minute)
	cfg.SweepEvery = cmp.Or(cfg.SweepEvery, time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("river source %s: %w", cfg.Source, err)
	}
	return &Source{cfg: cfg, client: client}, nil
}

// Name is the source's name.
func (s *Source) Name() string { return s.cfg.Source }

// Run imports until ctx ends: every page it can, then every Every what
// came since, and every SweepEvery a sweep. A failed import is recorded on
// the source (the sources page shows it) and tried again, backing off to a
// minute; nothing is skipped.
func (s *Source) Run(ctx context.Context) error {
	wait, lastSweep := time.Duration(0), s.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		err := s.catchUp(ctx)
		if err == nil && s.cfg.Now().Sub(lastSweep) >= s.cfg.SweepEvery {
			err = s.Sweep(ctx)
			lastSweep = s.cfg.Now()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.cfg.Logger.Warn("river source: import failed", "source", s.cfg.Source, "err", err)
			if ferr := s.cfg.Store.ImportFailed(ctx, s.cfg.Source, err.Error()); ferr != nil {
				s.cfg.Logger.Warn("river source: record the failed import", "source", s.cfg.Source, "err", ferr)
			}
			wait = min(max(2*wait, s.cfg.Every), time.Minute)
		default:
			wait = s.cfg.Every
		}
	}
}

// catchUp imports page after page until it reaches the discards too fresh
// to pass, then records the check.
func (s *Source) catchUp(ctx context.Context) error {
	for {
		done, err := s.ImportPage(ctx)
		if err != nil {
			return err
		}
		if done {
			return s.cfg.Store.ImportChecked(ctx, s.cfg.Source)
		}
	}
}

// ImportPage imports the next page of discarded jobs after the cursor, up
// to those younger than Settle, and moves the cursor past them. It reports
// whether it reached the end.
func (s *Source) ImportPage(ctx context.Context) (bool, error) {
	from, err := s.cfg.Store.ImportCursor(ctx, s.cfg.Source)
	if err != nil {
		return false, err
	}
	params := river.NewJobListParams().States(rivertype.JobStateDiscarded).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderAsc).First(s.cfg.Page)
	if from != "" {
		var cursor river.JobListCursor
		if err := cursor.UnmarshalText([]byte(from)); err != nil {
			return false, fmt.Errorf("river source %s: its cursor %q: %w", s.cfg.Source, from, err)
		}
		params = params.After(&cursor)
	}
	res, err := s.client.JobList(ctx, params)
	if err != nil {
		return false, fmt.Errorf("river source %s: list discarded jobs: %w", s.cfg.Source, err)
	}
	now := s.cfg.Now()
	settled := len(res.Jobs)
	for i, job := range res.Jobs {
		if job.FinalizedAt == nil || job.FinalizedAt.After(now.Add(-s.cfg.Settle)) {
			settled = i
			break
		}
	}
	if settled == 0 {
		return true, nil
	}
	fresh := settled < len(res.Jobs)
	if fresh {
		// The cursor can only stand on a page's last job: read the settled
		// part again as a page of its own. A job that became visible
		// meanwhile sorts before them and is settled too.
		if res, err = s.client.JobList(ctx, params.First(settled)); err != nil {
			return false, fmt.Errorf("river source %s: list discarded jobs: %w", s.cfg.Source, err)
		}
	}
	to, err := res.LastCursor.MarshalText()
	if err != nil {
		return false, fmt.Errorf("river source %s: cursor: %w", s.cfg.Source, err)
	}
	if err := s.take(ctx, res.Jobs, from, string(to), now); err != nil {
		return false, err
	}
	return fresh || len(res.Jobs) < s.cfg.Page, nil
}

// Sweep re-reads the discards of the last Resweep and takes in any the
// cursor passed by (one whose transaction committed after Settle), leaving
// the cursor where it is.
func (s *Source) Sweep(ctx context.Context) error {
	since := s.cfg.Now().Add(-s.cfg.Resweep)
	params := river.NewJobListParams().States(rivertype.JobStateDiscarded).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderAsc).First(s.cfg.Page).
		Where("finalized_at >= @since", river.NamedArgs{"since": since})
	for {
		cursor, err := s.cfg.Store.ImportCursor(ctx, s.cfg.Source)
		if err != nil {
			return err
		}
		res, err := s.client.JobList(ctx, params)
		if err != nil {
			return fmt.Errorf("river source %s: sweep: %w", s.cfg.Source, err)
		}
		if len(res.Jobs) == 0 {
			return nil
		}
		if err := s.take(ctx, res.Jobs, cursor, cursor, s.cfg.Now()); err != nil {
			return err
		}
		if len(res.Jobs) < s.cfg.Page {
			return nil
		}
		params = params.After(res.LastCursor)
	}
}

// take imports jobs as letters, moving the cursor from from to to.
func (s *Source) take(ctx context.Context, jobs []*rivertype.JobRow, from, to string, now time.Time) error {
	letters := make([]dlq.IngestLetter, 0, len(jobs))
	for _, job := range jobs {
		l, err := letterOf(job, now)
		if err != nil {
			return fmt.Errorf("river source %s: %w", s.cfg.Source, err)
		}
		letters = append(letters, l)
	}
	if err := s.linkRetries(ctx, jobs, letters); err != nil {
		return err
	}
	n, err := s.cfg.Store.Import(ctx, s.cfg.Source, letters, from, to)
	if errors.Is(err, dlq.ErrImportCursorMoved) {
		return nil // another console took them in; read from its cursor
	}
	if err != nil {
		return fmt.Errorf("river source %s: %w", s.cfg.Source, err)
	}
	if n > 0 {
		s.cfg.Logger.Info("river source: imported discarded jobs", "source", s.cfg.Source, "letters", n)
	}
	return nil
}

// linkRetries sets, on the letter of each job discarded again after a
// retry, the letter its previous discard made (ReplayOf): the console's
// lineage from a replay to how it ended.
func (s *Source) linkRetries(ctx context.Context, jobs []*rivertype.JobRow, letters []dlq.IngestLetter) error {
	var earlier []string
	for _, job := range jobs {
		for a := 1; a < job.Attempt && a <= dlq.MaxMaxAttempts; a++ {
			earlier = append(earlier, ExternalID(job.ID, a))
		}
	}
	if len(earlier) == 0 {
		return nil
	}
	prior, err := s.cfg.Store.PriorLetters(ctx, s.cfg.Source, earlier)
	if err != nil {
		return err
	}
	for i, job := range jobs {
		for a := job.Attempt - 1; a >= 1; a-- {
			if id, ok := prior[ExternalID(job.ID, a)]; ok {
				letters[i].ReplayOf = id
				break
			}
		}
	}
	return nil
}
