package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// suite runs every measurement Sizes.Runs times on one cluster, Redrive's
// and River's runs alternating, and collects the figures.
type suite struct {
	c     *cluster
	sizes Sizes
	// self is this binary, re-executed as worker children.
	self string
	// redriveBin is the `redrive` binary: seed, user, token, serve.
	redriveBin string
	log        *slog.Logger
	res        *results
	// templates maps engine name to its template databases.
	templates map[string]templates
	errs      []string
	// only, when set, keeps the steps whose name contains it, or any of its
	// "|"-separated parts ("dead-lettering|console"): a quicker
	// loop while working on one figure. The table is then partial.
	only string
	// engine, when set, measures only the engine of that name: an A/B of
	// two Redrive builds needs no River runs between them.
	engine string
	// riverUIDB is River's database for the console step, built in its
	// first round (riverUIData).
	riverUIDB string
}

// engines are the engines this run measures.
func (s *suite) engines() []engine {
	if s.engine == "" {
		return engines()
	}
	var es []engine
	for _, e := range engines() {
		if e.Name() == s.engine {
			es = append(es, e)
		}
	}
	return es
}

// wanted reports whether the step called name is to run.
func (s *suite) wanted(name string) bool {
	if s.only == "" {
		return true
	}
	for part := range strings.SplitSeq(s.only, "|") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// templates are an engine's databases that runs are copied from: its
// schema only, or with the jobs of a drain or dead-letter run enqueued.
type templates struct {
	base, noop, fail string
}

// prepare builds every engine's templates: migrated, then filled through
// the engine's own batch enqueue, then vacuumed so each copy starts with
// statistics and a visibility map, as a queue that has been up a while.
func (s *suite) prepare(ctx context.Context) error {
	s.templates = map[string]templates{}
	for _, e := range s.engines() {
		start := time.Now()
		prefix := strings.ToLower(e.Name())
		var t templates
		var err error
		if t.base, err = s.c.createDB(ctx, prefix+"_base", ""); err != nil {
			return err
		}
		if err := e.Migrate(ctx, s.c.dsn(t.base)); err != nil {
			return err
		}
		fill := func(kind jobKind, n int) (string, error) {
			name, err := s.c.createDB(ctx, prefix+"_"+string(kind), t.base)
			if err != nil {
				return "", err
			}
			if err := e.Enqueue(ctx, s.c.dsn(name), kind, n, 5_000); err != nil {
				return "", err
			}
			return name, s.c.vacuum(ctx, name)
		}
		// A filled template takes a while: build only those that the
		// steps to run (--only) copy.
		if s.needs("drain") {
			if t.noop, err = fill(kindNoop, s.sizes.DrainJobs); err != nil {
				return err
			}
		}
		if s.needs("dead-lettering") {
			if t.fail, err = fill(kindFail, s.sizes.DeadLetterJobs); err != nil {
				return err
			}
		}
		s.templates[e.Name()] = t
		s.log.Info("templates ready", "engine", e.Name(), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// step is one measurement of one engine in one round.
type step struct {
	name string
	run  func(ctx context.Context, e engine, round int) error
	// redriveOnly steps have no River counterpart.
	redriveOnly bool
}

// steps are the measurements of each round, in order (the console's
// comes after them).
func (s *suite) steps() []step {
	steps := []step{}
	for _, p := range []Profile{defaultProfile(), bestProfile()} {
		for _, n := range processCounts() {
			steps = append(steps, step{name: fmt.Sprintf("drain %s ×%d", p.Name, n),
				run: func(ctx context.Context, e engine, round int) error { return s.drain(ctx, e, p, n, round) }})
		}
	}
	for _, v := range drainVariants() {
		steps = append(steps, step{name: "drain defaults ×1, " + v.name, redriveOnly: true,
			run: func(ctx context.Context, e engine, round int) error { return s.drainWith(ctx, e, v, round) }})
	}
	return append(steps,
		step{name: "latency", run: s.latency},
		step{name: "batch enqueue", run: s.enqueue},
		step{name: "batch enqueue HTTP", run: s.enqueueHTTP, redriveOnly: true},
		step{name: "letters over HTTP", run: s.ingestHTTP, redriveOnly: true},
		step{name: "dead-lettering", run: s.deadLetter},
	)
}

// needs reports whether a step to run has a name starting with prefix.
func (s *suite) needs(prefix string) bool {
	for _, st := range s.steps() {
		if strings.HasPrefix(st.name, prefix) && s.wanted(st.name) {
			return true
		}
	}
	return false
}

// run measures everything, round by round. Within a round each
// measurement runs for Redrive and River back to back; the order flips
// every round (Redrive first, then River first, ...) so that neither
// engine always gets the warmer or the cooler machine. A failed step is
// logged and shown as failed; the others go on.
func (s *suite) run(ctx context.Context) {
	steps := s.steps()
	for round := range s.sizes.Runs {
		order := s.engines()
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, st := range steps {
			if !s.wanted(st.name) {
				continue
			}
			for _, e := range order {
				if ctx.Err() != nil {
					return
				}
				if st.redriveOnly && e.Name() != (redriveEngine{}).Name() {
					continue
				}
				s.do(ctx, fmt.Sprintf("round %d/%d: %s, %s", round+1, s.sizes.Runs, st.name, e.Name()),
					func(ctx context.Context) error { return st.run(ctx, e, round) })
			}
		}
		if ctx.Err() != nil {
			return
		}
		if s.wanted("console") {
			s.do(ctx, fmt.Sprintf("round %d/%d: console on %s letters", round+1, s.sizes.Runs, count(s.sizes.Letters)),
				func(ctx context.Context) error { return s.console(ctx, round) })
		}
	}
}

// do runs one step under its own timeout and logs its outcome.
func (s *suite) do(ctx context.Context, what string, fn func(context.Context) error) {
	// The console step seeds, reads and replays: it gets a timeout per part
	// inside, and a bound for the whole here.
	s.doWithin(ctx, 3*s.sizes.RunTimeout, what, fn)
}

// doWithin is do with a bound of its own: a step at ten times the size.
func (s *suite) doWithin(ctx context.Context, bound time.Duration, what string, fn func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	s.log.Info("start " + what)
	if err := fn(ctx); err != nil {
		s.log.Error("failed "+what, "err", err)
		s.errs = append(s.errs, fmt.Sprintf("%s: %v", what, err))
		return
	}
	s.log.Info("done "+what, "took", time.Since(start).Round(time.Millisecond))
}

// record adds a figure and logs it.
func (s *suite) record(key string, e engine, round int, v float64) {
	s.res.add(key, e.Name(), round, v)
	s.log.Info("figure", "key", key, "engine", e.Name(), "value", number(v))
}

// failRecord marks figures of a failed step.
func (s *suite) failRecord(e engine, keys ...string) {
	for _, k := range keys {
		s.res.fail(k, e.Name())
	}
}

// writeErrors lists the failed steps under the table.
func (s *suite) writeErrors(w io.Writer) {
	if len(s.errs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nFailed steps:")
	for _, e := range s.errs {
		fmt.Fprintf(w, "- %s\n", e)
	}
}
