package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
)

// cpuProfileEnv names a folder: when set, each worker child writes a CPU
// profile of its run there (engine-pid.pprof), for `go tool pprof`.
const cpuProfileEnv = "BENCH_CPUPROFILE"

// allocProfileEnv names a folder: when set, each worker child writes a
// profile of what its run allocated there (engine-pid.allocs.pprof), read
// with `go tool pprof -sample_index=alloc_space`.
const allocProfileEnv = "BENCH_ALLOCPROFILE"

// jobLogLinesEnv, when set to n, has each Redrive job log n lines through
// worker.Logger (Profile.JobLogLines): what keeping an attempt's lines
// costs the drain and the dead-lettering.
const jobLogLinesEnv = "BENCH_JOB_LOG_LINES"

// runChild is a worker process of a throughput or dead-letter run (the
// harness re-executes itself as `child`): it builds the engine's worker,
// prints "ready", waits for "go" on stdin, and works until stdin closes
// or ctx ends (SIGTERM).
func runChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("child", flag.ContinueOnError)
	engineName := fs.String("engine", "", "Redrive or River")
	profileName := fs.String("profile", "", "a profile of settings.go")
	dsn := fs.String("dsn", "", "the run's database")
	procs := fs.Int("procs", 1, "how many worker processes the run has")
	logLines := fs.Int("log-lines", 0, "how many lines each Redrive job logs (Profile.JobLogLines)")
	logPlain := fs.Bool("log-plain", false, "log them through a plain slog logger (Profile.JobLogPlain)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	e, err := engineByName(*engineName)
	if err != nil {
		return err
	}
	p, err := profileByName(*profileName)
	if err != nil {
		return err
	}
	p.JobLogLines, p.JobLogPlain = *logLines, *logPlain
	if v := os.Getenv(jobLogLinesEnv); v != "" {
		if p.JobLogLines, err = strconv.Atoi(v); err != nil || p.JobLogLines < 0 {
			return fmt.Errorf("%s=%q: want a number of lines", jobLogLinesEnv, v)
		}
	}
	run, closeFn, err := e.Worker(ctx, *dsn, p.forProcs(*procs))
	if err != nil {
		return err
	}
	defer closeFn()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	goCh := make(chan struct{})
	go func() {
		// The first line starts the work; the end of input (the harness
		// closed the pipe, or died) stops it.
		defer cancel()
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "go" {
				close(goCh)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	fmt.Fprintln(stdout, "ready")
	select {
	case <-goCh:
	case <-ctx.Done():
		return nil
	}
	if dir := os.Getenv(cpuProfileEnv); dir != "" {
		stop, err := profileCPU(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", e.Name(), os.Getpid())))
		if err != nil {
			return err
		}
		defer stop()
	}
	if dir := os.Getenv(allocProfileEnv); dir != "" {
		defer writeAllocProfile(filepath.Join(dir, fmt.Sprintf("%s-%d.allocs.pprof", e.Name(), os.Getpid())))
	}
	if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s worker: %w", e.Name(), err)
	}
	return nil
}

// profileCPU starts a CPU profile written to path; stop ends it.
func profileCPU(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// writeAllocProfile writes the allocations sampled since the process
// started to path; a failure is only reported, the run's figures stand.
func writeAllocProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "alloc profile:", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "alloc profile:", err)
	}
}
