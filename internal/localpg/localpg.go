// Package localpg starts a private PostgreSQL cluster from the installed
// server binaries, for `redrive dev` and the test suite when DATABASE_URL is
// unset. Nothing depends on a system database or a password: the cluster
// lives in its own folder, listens only on 127.0.0.1 at a port of its own,
// trusts local connections, and stops when its owner stops it (or, should
// the owner die, when the kernel delivers the parent-death signal).
//
// initdb and postgres refuse to run as root. When the current process is
// root, both run as an unprivileged system user (postgres by default) over a
// data folder chowned to it. That user must be able to reach the folder,
// which it cannot below a private directory such as root's home (mode 0700
// on Debian): then the cluster lives in a folder of its own under
// Config.SharedRoot instead, named after the folder asked for, so that the
// same checkout finds the same data again (Cluster.Dir says where). Remove
// deletes a cluster from either place, even once the folder it stood for
// is gone.
package localpg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/lib/pq" // the postgres driver, for the readiness check
)

// Config says where and how to run the cluster. Zero values take defaults.
type Config struct {
	// Dir holds the data folder (Dir/data) and the server log (Dir/postgres.log).
	// An existing data folder is reused, so a dev cluster keeps its data.
	Dir string
	// Port to listen on; 0 picks a free one.
	Port int
	// RunAsUser is the account initdb and postgres run as when this process
	// is root; default "postgres".
	RunAsUser string
	// Durable keeps fsync on. Tests turn it off: their data is thrown away.
	Durable bool
	// SharedRoot is where, when this process is root and RunAsUser cannot
	// reach Dir, the cluster lives instead: SharedRoot/cluster-<hash of
	// Dir>. Default /var/lib/redrive, a state directory, so the data
	// survives a reboot as it would have in Dir.
	SharedRoot string
}

// DefaultSharedRoot is Config.SharedRoot's default.
const DefaultSharedRoot = "/var/lib/redrive"

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	cfg   Config
	cmd   *exec.Cmd
	done  chan error
	port  int
	moved string // why the cluster is not in the folder asked for; "" when it is
}

// Start initialises the data folder if needed and starts postgres, waiting
// until it accepts connections.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localpg: Dir is required")
	}
	if cfg.RunAsUser == "" {
		cfg.RunAsUser = "postgres"
	}
	bindir, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential(cfg.RunAsUser)
	if err != nil {
		return nil, err
	}
	port := cfg.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	} else if err := portFree(port); err != nil {
		// Something else listens there — perhaps another cluster. Starting
		// would fail, and the readiness check could mistake that server for
		// ours: refuse instead.
		return nil, err
	}
	dir, moved, err := place(ctx, cfg, cred)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("localpg: create %s: %w", cfg.Dir, err)
	}
	dataDir := filepath.Join(cfg.Dir, "data")
	if err := initdb(ctx, bindir, dataDir, cred); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, port: port, done: make(chan error, 1), moved: moved}
	if err := c.start(ctx, bindir, dataDir, cred); err != nil {
		return nil, err
	}
	return c, nil
}

// DSN returns a connection string for database name on this cluster.
func (c *Cluster) DSN(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// Stop shuts the server down (fast mode: disconnect clients, then stop
// cleanly) and waits for it to exit. Stopping a stopped cluster does nothing.
func (c *Cluster) Stop() error { return c.stop(syscall.SIGINT) }

// StopImmediate shuts the server down the way a crash would (immediate
// mode: no checkpoint, crash recovery at the next start) and waits for it
// to exit. Tests use it to restart the database under running clients.
func (c *Cluster) StopImmediate() error { return c.stop(syscall.SIGQUIT) }

// Restart starts a stopped cluster again on the same port and data folder,
// waiting until it accepts connections; a running one is stopped first
// (fast mode). A Cluster is not safe for concurrent Stop and Restart.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(); err != nil {
		return err
	}
	bindir, err := FindBinDir()
	if err != nil {
		return err
	}
	cred, err := credential(c.cfg.RunAsUser)
	if err != nil {
		return err
	}
	c.done = make(chan error, 1)
	return c.start(ctx, bindir, filepath.Join(c.cfg.Dir, "data"), cred)
}

// Port is the TCP port the cluster listens on, on 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Dir is the folder the cluster lives in: Config.Dir, unless Moved says why
// not.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Moved explains, in a sentence, why the cluster is not in Config.Dir; it is
// empty when it is.
func (c *Cluster) Moved() string { return c.moved }

// place decides where the cluster lives: cfg.Dir, unless this process is
// root and the user postgres runs as cannot reach it (a parent folder is
// private); then a folder of its own under cfg.SharedRoot, named after
// cfg.Dir (sharedDir). It returns the folder and, when it moved, why.
func place(ctx context.Context, cfg Config, cred *syscall.Credential) (string, string, error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return "", "", fmt.Errorf("localpg: %w", err)
	}
	if cred == nil || reachable(ctx, dir, cred) {
		return dir, "", nil
	}
	shared := sharedDir(cfg, dir)
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return "", "", fmt.Errorf("localpg: create %s: %w", shared, err)
	}
	// The folder could have been made by someone else: use it only if it is
	// root's, as MkdirAll makes it, or postgres's, as initdb leaves it.
	if st, err := os.Stat(shared); err != nil {
		return "", "", fmt.Errorf("localpg: %w", err)
	} else if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && sys.Uid != cred.Uid {
		return "", "", fmt.Errorf("localpg: %s belongs to uid %d, neither root nor %s: remove it or set another folder", shared, sys.Uid, cfg.RunAsUser)
	}
	if !reachable(ctx, shared, cred) {
		return "", "", fmt.Errorf("localpg: the user %s runs as can reach neither %s nor %s", cfg.RunAsUser, dir, shared)
	}
	// Say whose it is, for whoever finds it there.
	_ = os.WriteFile(filepath.Join(shared, originFile), []byte("a private PostgreSQL cluster of Redrive for "+dir+"\n"), 0o644)
	why := fmt.Sprintf("PostgreSQL runs as the user %s, who cannot reach %s (a parent folder is private), so the cluster lives in %s",
		cfg.RunAsUser, dir, shared)
	return shared, why, nil
}

// sharedDir is the folder under cfg.SharedRoot that stands for dir (an
// absolute path) when the cluster cannot live in dir: named after a hash of
// dir, so the same checkout finds the same data again, and Remove finds it
// from the path alone.
func sharedDir(cfg Config, dir string) string {
	root := cfg.SharedRoot
	if root == "" {
		root = DefaultSharedRoot
	}
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(root, "cluster-"+hex.EncodeToString(sum[:6]))
}

// reachable reports whether the user of cred can reach dir: whether it can
// enter dir's parent or, while that does not exist yet, its nearest existing
// ancestor (the folders in between are made with mode 0755; dir itself is
// chowned to the user). It asks test(1) run as that user, so groups and
// ACLs count as they will for postgres.
func reachable(ctx context.Context, dir string, cred *syscall.Credential) bool {
	dir = filepath.Dir(dir)
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `test -x "$1"`, "sh", dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd.Run() == nil
}

func (c *Cluster) stop(sig syscall.Signal) error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	defer func() { c.cmd = nil }()
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("localpg: postgres did not stop within 30s; killed")
	}
}

func (c *Cluster) start(ctx context.Context, bindir, dataDir string, cred *syscall.Credential) error {
	logPath := filepath.Join(c.cfg.Dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("localpg: open log: %w", err)
	}
	args := []string{
		"-D", dataDir,
		"-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=200",
		"-c", "shared_buffers=256MB",
	}
	if !c.cfg.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	// Not exec.CommandContext: the server must outlive a cancelled start-up
	// context and be stopped by Stop, cleanly.
	cmd := exec.Command(filepath.Join(bindir, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		Setpgid:    true, // a Ctrl-C in the terminal reaches us, and we stop postgres cleanly
		// If this process dies without calling Stop, the kernel tells
		// postgres to shut down instead of leaving an orphan server behind.
		Pdeathsig: syscall.SIGINT,
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("localpg: start postgres: %w", err)
	}
	c.cmd = cmd
	go func() {
		c.done <- cmd.Wait()
		logFile.Close()
	}()
	if err := c.waitReady(ctx, logPath); err != nil {
		_ = c.Stop()
		return err
	}
	return nil
}

func (c *Cluster) waitReady(ctx context.Context, logPath string) error {
	deadline := time.Now().Add(60 * time.Second)
	db, err := sql.Open("postgres", c.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	defer db.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		pingCtx, cancel := context.WithTimeout(ctx, time.Second)
		err := db.PingContext(pingCtx)
		cancel()
		if err == nil {
			return c.checkOwn(ctx, db)
		}
		select {
		case werr := <-c.done:
			c.done <- werr
			return fmt.Errorf("localpg: postgres exited during start-up (%v); log tail:\n%s", werr, tail(logPath))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localpg: postgres not ready after 60s: %v; log tail:\n%s", err, tail(logPath))
		}
	}
}

// checkOwn makes sure the server that answered is the one we started, not
// another that took the port first.
func (c *Cluster) checkOwn(ctx context.Context, db *sql.DB) error {
	var dir string
	if err := db.QueryRowContext(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return fmt.Errorf("localpg: read data_directory: %w", err)
	}
	want := filepath.Join(c.cfg.Dir, "data")
	if filepath.Clean(dir) != filepath.Clean(want) {
		return fmt.Errorf("localpg: port %d is served by another PostgreSQL (data in %s), not ours (%s)", c.port, dir, want)
	}
	return nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("localpg: port %d is already in use (another PostgreSQL?); stop it or choose another port: %w", port, err)
	}
	return l.Close()
}

func initdb(ctx context.Context, bindir, dataDir string, cred *syscall.Credential) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		return nil // already initialised: reuse
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("localpg: create data folder: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("localpg: chown data folder: %w", err)
		}
		// The server's log and its parents must be reachable by that user.
		if err := os.Chown(filepath.Dir(dataDir), int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("localpg: chown cluster folder: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bindir, "initdb"),
		"-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("localpg: initdb %s: %w\n%s", dataDir, err, out.String())
	}
	return nil
}

// credential returns who to run postgres as: nil (ourselves) unless we are root.
func credential(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("localpg: running as root, and PostgreSQL refuses to; user %q to run it as: %w", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// FindBinDir locates initdb and postgres: `pg_config --bindir` first, then
// Debian's versioned folders, newest version first.
func FindBinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if hasServer(dir) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return pgMajor(matches[i]) > pgMajor(matches[j]) })
	for _, dir := range matches {
		if hasServer(dir) {
			return dir, nil
		}
	}
	return "", errors.New("localpg: no PostgreSQL server binaries found (install them with `apt-get install postgresql`, or set DATABASE_URL)")
}

func hasServer(dir string) bool {
	for _, bin := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return false
		}
	}
	return true
}

func pgMajor(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("localpg: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
