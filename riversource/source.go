// Package riversource makes a River queue (github.com/riverqueue/river) a
// source of Redrive's letters: it imports the jobs River discarded, as
// they are discarded, through River's own client.
//
// The importer reads River's discarded jobs in the order River finalised
// them (River's JobList, ordered by finalized_at, which River's index on
// (state, finalized_at) serves), a page at a time from a cursor kept in
// Redrive's database; each page and the cursor's move commit together. A
// job is passed only once it is Settle old: River stamps finalized_at
// before the transaction that discards the job commits (its completer
// writes outcomes in batches), so a job stamped earlier may become visible
// after a later one was read, and on a loaded database later than Settle.
// Sweeps re-read the recent discards (the last RecentSweep, every
// RecentEvery; the last Resweep, every SweepEvery) and take in what the
// cursor passed by; importing is idempotent on the letter's identity (job
// id and attempt), so a job read twice is one letter, and a sweep asks the
// store which it already has before it makes any letter.
package riversource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
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
	// RecentSweep is how far back the frequent sweep re-reads, every
	// RecentEvery; defaults 1 minute and 5 s.
	RecentSweep, RecentEvery time.Duration
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
	// window is how far past the cursor a read looks (next).
	window time.Duration
	// lastChecked is when the source last recorded a check; failed says
	// whether it recorded a failure since.
	lastChecked time.Time
	failed      bool
}

// New returns the River source in cfg.Pool's database. Its River client
// only reads and retries jobs: it works none.
func New(cfg Config) (*Source, error) {
	cfg.Every = cmp.Or(cfg.Every, 250*time.Millisecond)
	cfg.Settle = cmp.Or(cfg.Settle, time.Second)
	cfg.Page = cmp.Or(cfg.Page, 1000)
	cfg.RecentSweep = cmp.Or(cfg.RecentSweep, time.Minute)
	cfg.RecentEvery = cmp.Or(cfg.RecentEvery, 5*time.Second)
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
	return &Source{cfg: cfg, client: client, window: time.Second}, nil
}

// Name is the source's name.
func (s *Source) Name() string { return s.cfg.Source }

// Run imports until ctx ends: every page it can, then every Every what
// came since, and the sweeps when they are due. A failed import is
// recorded on the source (the sources page shows it) and tried again,
// backing off to a minute; nothing is skipped.
func (s *Source) Run(ctx context.Context) error {
	wait, lastSweep, lastRecent := time.Duration(0), s.cfg.Now(), s.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		err := s.CatchUp(ctx)
		switch {
		case err != nil:
		case s.cfg.Now().Sub(lastSweep) >= s.cfg.SweepEvery:
			err = s.Sweep(ctx)
			lastSweep, lastRecent = s.cfg.Now(), s.cfg.Now()
		case s.cfg.Now().Sub(lastRecent) >= s.cfg.RecentEvery:
			err = s.sweep(ctx, s.cfg.RecentSweep)
			lastRecent = s.cfg.Now()
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.cfg.Logger.Warn("river source: import failed", "source", s.cfg.Source, "err", err)
			s.failed = true
			if ferr := s.cfg.Store.ImportFailed(ctx, s.cfg.Source, err.Error()); ferr != nil {
				s.cfg.Logger.Warn("river source: record the failed import", "source", s.cfg.Source, "err", ferr)
			}
			wait = min(max(2*wait, s.cfg.Every), time.Minute)
		default:
			wait = s.cfg.Every
		}
	}
}

// CatchUp imports page after page until it reaches the discards too
// fresh to pass, then records the check. River is read a page ahead: the
// next page is read and made into letters while the last is written. It
// is not safe for concurrent use.
func (s *Source) CatchUp(ctx context.Context) error {
	from, err := s.cfg.Store.ImportCursor(ctx, s.cfg.Source)
	if err != nil {
		return err
	}
	after, err := parseCursor(from)
	if err != nil {
		return fmt.Errorf("river source %s: %w", s.cfg.Source, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pages := make(chan page, 1)
	go s.readAhead(ctx, after, pages)
	for p := range pages {
		if p.err != nil {
			return p.err
		}
		if len(p.jobs) > 0 {
			ok, err := s.write(ctx, p.jobs, p.letters, from, p.to.String())
			if err != nil || !ok {
				return err
			}
			from = p.to.String()
		}
		if p.end {
			return s.checked(ctx)
		}
	}
	return ctx.Err()
}

// page is a page of discarded jobs read ahead, as letters, and the cursor
// after it.
type page struct {
	jobs    []*rivertype.JobRow
	letters []dlq.IngestLetter
	to      cursor
	end     bool
	err     error
}

// readAhead sends the pages after c to pages until the last, an error or
// ctx's end, then closes it.
func (s *Source) readAhead(ctx context.Context, c cursor, pages chan<- page) {
	defer close(pages)
	now := s.cfg.Now()
	for {
		var p page
		p.jobs, p.to, p.end, p.err = s.next(ctx, c, now.Add(-s.cfg.Settle))
		if p.err == nil {
			p.letters, p.err = s.letters(p.jobs, now)
		}
		select {
		case pages <- p:
		case <-ctx.Done():
			return
		}
		if p.end || p.err != nil {
			return
		}
		c = p.to
	}
}

// checked records that the source was read to the end, at most every few
// seconds while nothing failed, so that an idle source costs no write per
// look; a failure recorded since is cleared at once.
func (s *Source) checked(ctx context.Context) error {
	if s.cfg.Now().Sub(s.lastChecked) < checkedEvery && !s.failed {
		return nil
	}
	if err := s.cfg.Store.ImportChecked(ctx, s.cfg.Source); err != nil {
		return err
	}
	s.lastChecked, s.failed = s.cfg.Now(), false
	return nil
}

// checkedEvery is how often an idle source records its check.
const checkedEvery = 5 * time.Second

// Sweep re-reads the discards of the last Resweep and takes in any the
// cursor passed by (one whose transaction committed after Settle), leaving
// the cursor where it is.
func (s *Source) Sweep(ctx context.Context) error { return s.sweep(ctx, s.cfg.Resweep) }

// sweep re-reads the discards of the last back and takes in those the
// store does not have yet.
func (s *Source) sweep(ctx context.Context, back time.Duration) error {
	now := s.cfg.Now()
	after := cursor{at: now.Add(-back)}
	for {
		from, err := s.cfg.Store.ImportCursor(ctx, s.cfg.Source)
		if err != nil {
			return err
		}
		jobs, to, end, err := s.next(ctx, after, now.Add(-s.cfg.Settle))
		if err != nil {
			return err
		}
		if jobs, err = s.unknown(ctx, jobs); err != nil {
			return err
		}
		if len(jobs) > 0 {
			s.cfg.Logger.Info("river source: a sweep found discards the cursor had passed", "source", s.cfg.Source, "jobs", len(jobs))
			if err := s.take(ctx, jobs, from, from, s.cfg.Now()); err != nil {
				return err
			}
		}
		if end {
			return nil
		}
		after = to
	}
}

// unknown returns the jobs whose letters the store does not have.
func (s *Source) unknown(ctx context.Context, jobs []*rivertype.JobRow) ([]*rivertype.JobRow, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids := make([]string, len(jobs))
	for i, job := range jobs {
		ids[i] = dlq.RiverExternalID(job.ID, job.Attempt)
	}
	known, err := s.cfg.Store.PriorLetters(ctx, s.cfg.Source, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(jobs, func(job *rivertype.JobRow) bool {
		_, ok := known[dlq.RiverExternalID(job.ID, job.Attempt)]
		return ok
	}), nil
}

// next reads the discarded jobs after c, in the order River discarded them
// (finalized_at, id), up to a page and before horizon. It returns them,
// the cursor after them, and whether it reached horizon.
//
// Each read looks at a window of finalized_at after c, which grows while
// windows come back sparse and shrinks when one fills a page: River's index
// is on (state, finalized_at), and ordering by (finalized_at, id), as
// River's JobList does, makes Postgres sort every row its range condition
// admits, so an open-ended range would sort every discard after the cursor
// for each page. A window that comes back short was read whole, so the
// cursor moves to its end.
func (s *Source) next(ctx context.Context, c cursor, horizon time.Time) ([]*rivertype.JobRow, cursor, bool, error) {
	if c.at.IsZero() {
		return s.jump(ctx, c, horizon)
	}
	upper := c.at.Add(s.window)
	if !upper.Before(horizon) {
		upper = horizon
	}
	jobs, err := s.list(ctx, c, upper, s.cfg.Page)
	switch {
	case err != nil:
		return nil, c, false, err
	case len(jobs) == s.cfg.Page:
		s.window = max(s.window/2, time.Millisecond)
		last := jobs[len(jobs)-1]
		return jobs, cursor{at: *last.FinalizedAt, id: last.ID}, false, nil
	case len(jobs) < s.cfg.Page/4:
		s.window = min(2*s.window, time.Hour)
	}
	if len(jobs) == 0 && upper.Before(horizon) {
		return s.jump(ctx, c, horizon)
	}
	return jobs, cursor{at: upper}, upper.Equal(horizon), nil
}

// jump finds the first discard after c and before horizon, past a stretch
// with none (or from the start), and returns no jobs and the cursor just
// before it; at the end, c itself.
func (s *Source) jump(ctx context.Context, c cursor, horizon time.Time) ([]*rivertype.JobRow, cursor, bool, error) {
	first, err := s.list(ctx, c, horizon, 1)
	if err != nil || len(first) == 0 {
		return nil, c, err == nil, err
	}
	return nil, cursor{at: *first[0].FinalizedAt}, false, nil
}

// list reads up to limit of River's discarded jobs after c and before
// upper, in the order River discarded them, through River's JobList. The
// bounds on finalized_at are what let the index on (state, finalized_at)
// serve the read: the keyset condition alone (an OR, as River's own cursor
// writes it) would have Postgres walk every discard before the cursor.
func (s *Source) list(ctx context.Context, c cursor, upper time.Time, limit int) ([]*rivertype.JobRow, error) {
	where := "state = 'discarded' AND finalized_at IS NOT NULL AND finalized_at < @redrive_upper"
	args := river.NamedArgs{"redrive_upper": upper}
	if !c.at.IsZero() {
		where += " AND finalized_at >= @redrive_after_at AND (finalized_at > @redrive_after_at OR id > @redrive_after_id)"
		args["redrive_after_at"], args["redrive_after_id"] = c.at, c.id
	}
	params := river.NewJobListParams().States(rivertype.JobStateDiscarded).
		OrderBy(river.JobListOrderByFinalizedAt, river.SortOrderAsc).First(limit).Where(where, args)
	res, err := s.client.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("river source %s: list discarded jobs: %w", s.cfg.Source, err)
	}
	return res.Jobs, nil
}

// cursor is where an import left off: the last job taken, in River's order
// of discards (finalized_at, id). The zero cursor is the start.
type cursor struct {
	at time.Time
	id int64
}

// String is the cursor as the store keeps it: "" for the start.
func (c cursor) String() string {
	if c.at.IsZero() {
		return ""
	}
	return c.at.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(c.id, 10)
}

// parseCursor reads a cursor String wrote.
func parseCursor(text string) (cursor, error) {
	if text == "" {
		return cursor{}, nil
	}
	rawAt, rawID, _ := strings.Cut(text, "/")
	at, atErr := time.Parse(time.RFC3339Nano, rawAt)
	id, idErr := strconv.ParseInt(rawID, 10, 64)
	if atErr != nil || idErr != nil {
		return cursor{}, fmt.Errorf("its import cursor %q is not a time and a job id: reset it (UPDATE sources SET import_cursor = NULL) to import again from the start, which makes no letter twice", text)
	}
	return cursor{at: at, id: id}, nil
}

// take imports jobs as letters, moving the cursor from from to to.
func (s *Source) take(ctx context.Context, jobs []*rivertype.JobRow, from, to string, now time.Time) error {
	letters, err := s.letters(jobs, now)
	if err != nil {
		return err
	}
	_, err = s.write(ctx, jobs, letters, from, to)
	return err
}

// letters are jobs as the letters Redrive keeps.
func (s *Source) letters(jobs []*rivertype.JobRow, now time.Time) ([]dlq.IngestLetter, error) {
	letters := make([]dlq.IngestLetter, 0, len(jobs))
	for _, job := range jobs {
		l, err := letterOf(job, now)
		if err != nil {
			return nil, fmt.Errorf("river source %s: %w", s.cfg.Source, err)
		}
		letters = append(letters, l)
	}
	return letters, nil
}

// write links the letters of jobs to their earlier discards and writes
// them, moving the cursor from from to to. It reports false, and writes
// nothing, when another console moved the cursor first.
func (s *Source) write(ctx context.Context, jobs []*rivertype.JobRow, letters []dlq.IngestLetter, from, to string) (bool, error) {
	if err := s.linkRetries(ctx, jobs, letters); err != nil {
		return false, err
	}
	n, err := s.cfg.Store.Import(ctx, s.cfg.Source, letters, from, to)
	if errors.Is(err, dlq.ErrImportCursorMoved) {
		return false, nil // another console took them in; read from its cursor
	}
	if err != nil {
		return false, fmt.Errorf("river source %s: %w", s.cfg.Source, err)
	}
	if n > 0 {
		s.cfg.Logger.Info("river source: imported discarded jobs", "source", s.cfg.Source, "letters", n)
	}
	return true, nil
}

// linkRetries sets, on the letter of each job discarded again after a
// retry, the letter its previous discard made (ReplayOf): the console's
// lineage from a replay to how it ended.
func (s *Source) linkRetries(ctx context.Context, jobs []*rivertype.JobRow, letters []dlq.IngestLetter) error {
	var earlier []string
	for _, job := range jobs {
		for a := 1; a < job.Attempt && a <= dlq.MaxMaxAttempts; a++ {
			earlier = append(earlier, dlq.RiverExternalID(job.ID, a))
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
			if id, ok := prior[dlq.RiverExternalID(job.ID, a)]; ok {
				letters[i].ReplayOf = id
				break
			}
		}
	}
	return nil
}
