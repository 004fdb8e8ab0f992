package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// redrive runs the redrive binary on dsn, with stdin as its input, and
// returns its standard output.
func (s *suite) redrive(ctx context.Context, dsn, stdin string, args ...string) (string, error) {
	out, _, err := s.redriveProcess(ctx, dsn, stdin, args...)
	return out, err
}

// redriveProcess is redrive, also returning how the process ended (its
// resource usage: the seed's peak memory).
func (s *suite) redriveProcess(ctx context.Context, dsn, stdin string, args ...string) (string, *os.ProcessState, error) {
	cmd := exec.CommandContext(ctx, s.redriveBin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn, "REDRIVE_LOG_LEVEL=warn")
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", cmd.ProcessState, fmt.Errorf("redrive %s: %w: %s", args[0], err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), cmd.ProcessState, nil
}

// server is a running `redrive serve` and how to call it.
type server struct {
	proc   *process
	base   string
	token  string
	client *http.Client
}

// serve starts `redrive serve` on a free loopback port, signed in with an
// API token of the bench user, and waits until /readyz says it is ready;
// env is added to the console's environment.
func (s *suite) serve(ctx context.Context, dsn string, env ...string) (*server, error) {
	if _, err := s.redrive(ctx, dsn, benchPassword+"\n", "user", "add", benchUser, "--role", "operator"); err != nil {
		return nil, err
	}
	out, err := s.redrive(ctx, dsn, "", "token", "create", "--user", benchUser, "--name", "bench")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc, err := startProcess("redrive serve", s.redriveBin, []string{"serve", "--addr", addr},
		append([]string{"DATABASE_URL=" + dsn, "REDRIVE_SESSION_KEYS=" + hex.EncodeToString(key), "REDRIVE_LOG_LEVEL=warn"}, env...),
		nil, io.Discard, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	srv := &server{proc: proc, base: "http://" + addr, token: strings.TrimSpace(out), client: benchClient()}
	if err := srv.waitReady(ctx, 30*time.Second); err != nil {
		srv.close()
		return nil, err
	}
	return srv, nil
}

// benchClient is the HTTP client every console measure uses, Redrive's
// and River UI's alike.
func benchClient() *http.Client {
	return &http.Client{
		Timeout:   time.Minute,
		Transport: &http.Transport{MaxIdleConnsPerHost: 100, MaxConnsPerHost: 100},
	}
}

func (srv *server) waitReady(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if code, _, err := srv.do(ctx, http.MethodGet, "/readyz", ""); err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redrive serve not ready within %s", d)
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// do sends one request with the bench user's token and reads the whole
// body, as a browser would.
func (srv *server) do(ctx context.Context, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, srv.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("request %s: %w", path, err)
	}
	if srv.token != "" {
		req.Header.Set("Authorization", "Bearer "+srv.token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := srv.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read body: %w", method, path, err)
	}
	return resp.StatusCode, b, nil
}

// get fetches a page and insists on 200.
func (srv *server) get(ctx context.Context, path string) error {
	code, body, err := srv.do(ctx, http.MethodGet, path, "")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %.200s", path, code, body)
	}
	return nil
}

func (srv *server) close() {
	_ = srv.proc.stop(30 * time.Second)
	srv.client.CloseIdleConnections()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
