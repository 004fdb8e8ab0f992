package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a subprocess the harness started and must stop: a worker
// child or `redrive serve`. It gets its own process group, so a Ctrl-C in
// the terminal reaches only the harness, which then stops it cleanly; and
// the kernel signals it should the harness die without doing so.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts bin with args. stdin, when not nil, feeds its
// standard input; stdout, when not nil, receives its standard output;
// stderr goes to ours, so its failures are seen.
func startProcess(name, bin string, args, env []string, stdin io.Reader, stdout io.Writer, dying syscall.Signal) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: dying}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// pid is the process id, for reading its memory from /proc.
func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. A process that had already died reports how.
func (p *process) stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-p.done:
		p.done <- err
		return exitErr(p.name, err)
	case <-t.C:
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		return fmt.Errorf("%s did not stop within %s: killed", p.name, grace)
	}
}

// exitErr treats an exit on SIGTERM as the clean stop it was asked for.
func exitErr(name string, err error) error {
	var ee *exec.ExitError
	if err == nil || (errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// workerChild is a worker process: this binary re-executed as `child`. It
// connects and builds its worker, says "ready" on stdout, starts working
// when told "go" on stdin, and shuts down when stdin closes.
type workerChild struct {
	*process
	stdin io.WriteCloser
	ready chan error
}

// childStopGrace bounds a child's shutdown: its worker's own shutdown
// grace, and then some.
const childStopGrace = 45 * time.Second

func startWorkerChild(self string, e engine, dsn string, p Profile, index, procs int) (*workerChild, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("child pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		return nil, fmt.Errorf("child pipe: %w", err)
	}
	name := fmt.Sprintf("%s worker %d", e.Name(), index)
	proc, err := startProcess(name, self, []string{"child", "--engine", e.Name(), "--profile", p.Name, "--dsn", dsn,
		"--procs", strconv.Itoa(procs), "--log-lines", strconv.Itoa(p.JobLogLines), "--log-plain=" + strconv.FormatBool(p.JobLogPlain)},
		nil, stdinR, stdoutW, syscall.SIGKILL)
	stdinR.Close()
	stdoutW.Close()
	if err != nil {
		stdinW.Close()
		stdoutR.Close()
		return nil, err
	}
	c := &workerChild{process: proc, stdin: stdinW, ready: make(chan error, 1)}
	go func() {
		defer stdoutR.Close()
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" {
				c.ready <- nil
				return
			}
		}
		c.ready <- fmt.Errorf("%s exited before it was ready", name)
	}()
	return c, nil
}

// waitReady waits for the child's "ready".
func (c *workerChild) waitReady(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-c.ready:
		return err
	case <-t.C:
		return fmt.Errorf("%s not ready within %s", c.name, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start tells the child to start working.
func (c *workerChild) start() error {
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	return nil
}

// shutdown closes the child's stdin, its signal to shut down cleanly, and
// waits for it (SIGTERM, then SIGKILL, past the grace).
func (c *workerChild) shutdown() error {
	c.stdin.Close()
	t := time.NewTimer(childStopGrace)
	defer t.Stop()
	select {
	case err := <-c.done:
		c.done <- err
		return exitErr(c.name, err)
	case <-t.C:
		return c.stop(5 * time.Second)
	}
}

// startChildren starts n worker children and waits until all are ready.
// On error, the ones started are shut down.
func startChildren(ctx context.Context, self string, e engine, dsn string, p Profile, n int) ([]*workerChild, error) {
	var kids []*workerChild
	for i := range n {
		k, err := startWorkerChild(self, e, dsn, p, i+1, n)
		if err != nil {
			shutdownAll(kids)
			return nil, err
		}
		kids = append(kids, k)
	}
	for _, k := range kids {
		if err := k.waitReady(ctx, time.Minute); err != nil {
			shutdownAll(kids)
			return nil, err
		}
	}
	return kids, nil
}

// shutdownAll stops every child, at the same time, and reports all errors.
func shutdownAll(kids []*workerChild) error {
	errs := make(chan error, len(kids))
	for _, k := range kids {
		go func() { errs <- k.shutdown() }()
	}
	var all []error
	for range kids {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}
