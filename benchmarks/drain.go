package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pollEvery is how often the harness asks whether a run's queue is empty;
// it bounds the error of a measured duration.
const pollEvery = 50 * time.Millisecond

// drainOutcome is what one run of worker processes did to a full queue.
type drainOutcome struct {
	took time.Duration
	cost dbCost
	// cpu is the worker processes' CPU time, user and system, from start
	// to exit: on a shared machine a steadier measure of the client's
	// work than the rate.
	cpu time.Duration
}

// drain measures throughput: procs worker processes with profile p drain
// a copy of the queue of DrainJobs no-op jobs.
func (s *suite) drain(ctx context.Context, e engine, p Profile, procs, round int) error {
	keys := []string{drainKey("rate", p, procs), drainKey("dbms", p, procs), drainKey("wal", p, procs)}
	out, err := s.work(ctx, e, s.templates[e.Name()].noop, p, procs, "", nil)
	if err != nil {
		s.failRecord(e, keys...)
		return err
	}
	n := float64(s.sizes.DrainJobs)
	s.record(keys[0], e, round, perSecond(s.sizes.DrainJobs, out.took))
	s.record(keys[1], e, round, out.cost.ExecMS/n)
	s.record(keys[2], e, round, float64(out.cost.WALBytes)/n)
	s.log.Info("per job", "engine", e.Name(), "profile", p.Name, "procs", procs,
		"worker_cpu_us", number(float64(out.cpu.Microseconds())/n), "statements", number(float64(out.cost.Calls)/n))
	return nil
}

// drainVariant is Redrive's drain at the defaults, one process, with a
// feature in use that must not slow it: the figure stands beside the plain
// drain's, with their ratio round by round (the plain drain runs first in
// each round, on the same machine).
type drainVariant struct {
	name  string // in the step's name and the figure's key
	label string
	// setup is SQL run on the run's database before the workers start.
	setup string
	// logLines is how many lines each job logs through worker.Logger, or
	// when logPlain through a plain slog logger.
	logLines int
	logPlain bool
}

// drainVariants are the features whose cost on the drain is measured.
func drainVariants() []drainVariant {
	return []drainVariant{
		{name: "throttled", label: "a throttle on its task that it never fills (100,000 slots)",
			setup: `INSERT INTO throttles (kind, name, max_running, reason, set_by)
				VALUES ('task', '` + redriveNoop + `', 100000, 'bench', 'bench')`},
		{name: "logging", label: "each job logging 3 lines through worker.Logger (a success's are dropped)", logLines: 3},
		{name: "logging plainly", label: "each job logging the same 3 lines through a slog text logger of its own, writing them nowhere (the lines' own cost)",
			logLines: 3, logPlain: true},
	}
}

// variantKey is the key of a variant's figure.
func variantKey(what string, v drainVariant) string {
	return drainKey(what, defaultProfile(), 1) + "." + v.name
}

// drainWith measures Redrive's drain at the defaults with v in use, and
// its rate over the plain drain's of the same round.
func (s *suite) drainWith(ctx context.Context, e engine, v drainVariant, round int) error {
	p := defaultProfile()
	p.JobLogLines, p.JobLogPlain = v.logLines, v.logPlain
	keys := []string{variantKey("rate", v), variantKey("ratio", v)}
	out, err := s.work(ctx, e, s.templates[e.Name()].noop, p, 1, v.setup, nil)
	if err != nil {
		s.failRecord(e, keys...)
		return err
	}
	rate := perSecond(s.sizes.DrainJobs, out.took)
	s.record(keys[0], e, round, rate)
	if plain, ok := s.res.values[drainKey("rate", p, 1)][e.Name()][round]; ok && plain > 0 {
		s.record(keys[1], e, round, rate/plain)
	}
	s.log.Info("per job", "engine", e.Name(), "variant", v.name,
		"worker_cpu_us", number(float64(out.cpu.Microseconds())/float64(s.sizes.DrainJobs)))
	return nil
}

// setupEnv names SQL to run on each Redrive run's database before its
// workers start (BENCH_REDRIVE_SETUP="INSERT INTO throttles ..."): the
// engine's cost with some state in place, such as a throttle, measured by
// the same runs. Its statements come before the meter starts.
const setupEnv = "BENCH_REDRIVE_SETUP"

// runSetup runs a step's own setup SQL, then setupEnv's, on a Redrive
// run's database.
func runSetup(ctx context.Context, e engine, dsn, setup string) error {
	env := os.Getenv(setupEnv)
	if setup == "" && env == "" || e.Name() != "Redrive" {
		return nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	defer conn.Close(ctx)
	for _, sql := range []string{setup, env} {
		if sql == "" {
			continue
		}
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("setup %q: %w", sql, err)
		}
	}
	return nil
}

// work copies template, runs setup (SQL, perhaps empty) on the copy,
// starts procs worker children with profile p, waits until they are
// ready, then times them from "go" until no job is left unfinished. after,
// when set, inspects the database before it is dropped.
func (s *suite) work(ctx context.Context, e engine, template string, p Profile, procs int, setup string,
	after func(ctx context.Context, db *pgxpool.Pool) error) (drainOutcome, error) {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	var out drainOutcome
	err := s.c.withDB(ctx, strings.ToLower(e.Name())+"_run", template, func(name string) error {
		db, err := s.c.observe(ctx, name)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := runSetup(ctx, e, s.c.dsn(name), setup); err != nil {
			return err
		}
		kids, err := startChildren(ctx, s.self, e, s.c.dsn(name), p, procs)
		if err != nil {
			return err
		}
		stopped := false
		defer func() {
			if !stopped {
				_ = shutdownAll(kids)
			}
		}()
		if err := s.c.quiesce(ctx); err != nil {
			return err
		}
		meter, err := s.c.meter(ctx, name)
		if err != nil {
			return err
		}
		start := time.Now()
		for _, k := range kids {
			if err := k.start(); err != nil {
				return err
			}
		}
		if out.took, err = waitDrained(ctx, e, db, start); err != nil {
			return err
		}
		stopped = true
		if err := shutdownAll(kids); err != nil {
			return err
		}
		for _, k := range kids {
			if st := k.cmd.ProcessState; st != nil {
				out.cpu += st.UserTime() + st.SystemTime()
			}
		}
		if out.cost, err = meter.stop(ctx); err != nil {
			return err
		}
		if after != nil {
			return after(ctx, db)
		}
		return nil
	})
	return out, err
}

// waitDrained polls until the engine reports no unfinished job and
// returns the time since start.
func waitDrained(ctx context.Context, e engine, db *pgxpool.Pool, start time.Time) (time.Duration, error) {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return 0, fmt.Errorf("drain: %w", errNotDone)
			}
			return 0, fmt.Errorf("drain: %w", ctx.Err())
		case <-tick.C:
		}
		left, err := e.Unfinished(ctx, db)
		if err != nil {
			return 0, err
		}
		if !left {
			return time.Since(start), nil
		}
	}
}
