// Command benchmarks is `make bench`: Redrive side by side with River
// 0.51.2, on a private PostgreSQL cluster started for the run, with the
// same settings every time. It prints one Markdown table (and writes it to
// --out). Each figure is the median of Sizes.Runs runs with its min–max.
//
// It lives in its own module so River is a dependency of the benchmark
// only, never of Redrive. Knobs are in settings.go.
//
//	go run . --redrive ../bin/redrive [--quick] [--out ../bench/latest.md]
//
// The binary re-executes itself as `child` for each worker process, and as
// `riverui` for River UI in the console step.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is the whole program: the suite, or a worker child.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "child" {
		return runChild(ctx, args[1:], stdin, stdout)
	}
	if len(args) > 0 && args[0] == "riverui" {
		return runRiverUI(ctx, args[1:], stderr)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small sizes, one run each: checks the harness in a few minutes")
	redriveBin := fs.String("redrive", "", "the redrive binary (make build); required")
	out := fs.String("out", "", "also write the table to this file")
	version := fs.String("version", "dev", "the Redrive build being measured, for the header")
	timeout := fs.Duration("timeout", 4*time.Hour, "stop everything after this long")
	only := fs.String("only", "", "run only the steps whose name contains this, or one of its |-separated parts (e.g. \"drain best\", \"dead-lettering|console\")")
	engine := fs.String("engine", "", "measure only this engine (Redrive or River), e.g. to compare two Redrive builds")
	runs := fs.Int("runs", 0, "runs of each figure instead of the mode's (3 in full mode): fewer for a quick look at one figure")
	scale := fs.String("scale", "", "instead of the suite, the console at the normal size and at this many letters (e.g. 10M), side by side, with a retention purge at the larger")
	scaleFrom := fs.String("scale-from", "", "with --scale, the smaller size instead of the normal run's (e.g. 100k: a tenfold step on a disk that cannot hold ten million)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *engine != "" {
		if _, err := engineByName(*engine); err != nil {
			return fmt.Errorf("--engine: %w", err)
		}
	}
	if *redriveBin == "" {
		return errors.New("--redrive is required: the path of the redrive binary (make build)")
	}
	bin, err := filepath.Abs(*redriveBin)
	if err != nil {
		return fmt.Errorf("--redrive: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	sizes := fullSizes()
	if *quick {
		sizes = quickSizes()
	}
	if *runs < 0 {
		return errors.New("--runs must not be negative")
	}
	if *runs > 0 {
		sizes.Runs = *runs
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	rp := report{started: time.Now(), quick: *quick, version: *version, sizes: sizes}
	if *scale != "" {
		letters, err := parseScale(*scale)
		if err != nil {
			return fmt.Errorf("--scale: %w", err)
		}
		if *scaleFrom != "" {
			if rp.sizes.Letters, err = parseScale(*scaleFrom); err != nil {
				return fmt.Errorf("--scale-from: %w", err)
			}
			// Each bulk action takes a tenth of the smaller size's letters
			// at most: it must find that many pending.
			rp.sizes.BulkSlice = min(rp.sizes.BulkSlice, rp.sizes.Letters/10)
		}
		return runScale(ctx, rp, self, bin, *out, letters, logger, stdout)
	}
	return runSuite(ctx, rp, self, bin, *out, *only, *engine, logger, stdout)
}

// runSuite starts the cluster, measures, stops the cluster (also on
// Ctrl-C or timeout), and prints the table of whatever was measured.
func runSuite(ctx context.Context, rp report, self, redriveBin, out, only, engine string, logger *slog.Logger, stdout io.Writer) error {
	logger.Info("starting the private PostgreSQL cluster")
	c, err := startCluster(ctx)
	if err != nil {
		return err
	}
	defer c.stop()
	if rp.settings, err = c.settings(ctx); err != nil {
		return err
	}
	s := &suite{c: c, sizes: rp.sizes, self: self, redriveBin: redriveBin, log: logger, res: newResults(rp.sizes.Runs), only: only, engine: engine}
	if err := s.prepare(ctx); err != nil {
		return fmt.Errorf("prepare templates: %w", err)
	}
	s.run(ctx)
	rp.took = time.Since(rp.started)

	var b strings.Builder
	rp.write(&b, s)
	return finish(ctx, s, b.String(), out, stdout)
}

// finish prints the table, writes it to out when set, and says whether
// the run was complete.
func finish(ctx context.Context, s *suite, table, out string, stdout io.Writer) error {
	fmt.Fprint(stdout, "\n"+table)
	if out != "" {
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("stopped before the end: %w", ctx.Err())
	case len(s.errs) > 0:
		return fmt.Errorf("%d step(s) failed (listed under the table)", len(s.errs))
	}
	return nil
}

// runScale is the scale step alone (--scale): Redrive's console at the
// normal size and at letters, on a private cluster like runSuite's.
func runScale(ctx context.Context, rp report, self, redriveBin, out string, letters int, logger *slog.Logger, stdout io.Writer) error {
	logger.Info("starting the private PostgreSQL cluster")
	c, err := startCluster(ctx)
	if err != nil {
		return err
	}
	defer c.stop()
	if err := c.boundWAL(ctx); err != nil {
		return err
	}
	if rp.settings, err = c.settings(ctx); err != nil {
		return err
	}
	// Only Redrive's schema template: no step of the suite is wanted, so
	// no filled template is built.
	s := &suite{c: c, sizes: rp.sizes, self: self, redriveBin: redriveBin, log: logger, res: newResults(rp.sizes.Runs),
		only: "scale", engine: redriveEngine{}.Name()}
	if err := s.prepare(ctx); err != nil {
		return fmt.Errorf("prepare templates: %w", err)
	}
	s.scale(ctx, letters)
	rp.took = time.Since(rp.started)
	var b strings.Builder
	rp.writeScale(&b, s, letters)
	return finish(ctx, s, b.String(), out, stdout)
}
