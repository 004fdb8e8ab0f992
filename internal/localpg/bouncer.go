package localpg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lib/pq"
)

// BouncerConfig says how to run a private PgBouncer in front of a server,
// for the tests that prove Redrive works behind a transaction pooler.
type BouncerConfig struct {
	// Dir holds the configuration and the log (Dir/pgbouncer.log).
	Dir string
	// Upstream is a DSN of the server; its host, port, user and password are
	// what PgBouncer connects with, to whichever database a client names.
	Upstream string
	// PoolMode is transaction (the default), session or statement.
	PoolMode string
	// PoolSize is the server connections per database; default 4, fewer
	// than a Redrive process opens, so that clients share them as they
	// would in production.
	PoolSize int
	// RunAsUser is the account PgBouncer runs as when this process is root
	// (it refuses to run as root); default "postgres".
	RunAsUser string
}

// Bouncer is a running private PgBouncer.
type Bouncer struct {
	cmd     *exec.Cmd
	done    chan error
	port    int
	user    string
	logPath string
}

// FindBouncer locates the pgbouncer binary: on PATH, else in /usr/sbin,
// where Debian puts it and a normal user's PATH may not look.
func FindBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer", nil
	}
	return "", errors.New("localpg: pgbouncer not found (install it with `apt-get install pgbouncer`; `make test` does)")
}

// StartBouncer writes a configuration and starts PgBouncer, waiting until
// it accepts connections.
func StartBouncer(ctx context.Context, cfg BouncerConfig) (*Bouncer, error) {
	if cfg.Dir == "" || cfg.Upstream == "" {
		return nil, errors.New("localpg: BouncerConfig needs Dir and Upstream")
	}
	cfg = cfg.withDefaults()
	bin, err := FindBouncer()
	if err != nil {
		return nil, err
	}
	up, err := pq.NewConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("localpg: upstream: %w", err)
	}
	cred, err := credential(cfg.RunAsUser)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	user := cmp.Or(up.User, "postgres")
	if err := writeBouncerFiles(cfg, up, user, port); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.Dir, "pgbouncer.log")
	cmd, logFile, err := launchBouncer(bin, cfg.Dir, logPath, cred)
	if err != nil {
		return nil, err
	}
	b := &Bouncer{cmd: cmd, done: make(chan error, 1), port: port, user: user, logPath: logPath}
	go func() {
		b.done <- cmd.Wait()
		logFile.Close()
	}()
	if err := b.waitReady(ctx); err != nil {
		_ = b.Stop()
		return nil, err
	}
	return b, nil
}

// withDefaults fills in what the caller left zero: a transaction pooler
// of 4 server connections per database, run as postgres when root.
func (cfg BouncerConfig) withDefaults() BouncerConfig {
	cfg.PoolMode = cmp.Or(cfg.PoolMode, "transaction")
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 4
	}
	cfg.RunAsUser = cmp.Or(cfg.RunAsUser, "postgres")
	return cfg
}

// writeBouncerFiles creates cfg.Dir and writes PgBouncer's configuration
// and its user list there. The pooler trusts its clients: it is private
// to one test run and listens on 127.0.0.1 only.
func writeBouncerFiles(cfg BouncerConfig, up pq.Config, user string, port int) error {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("localpg: create %s: %w", cfg.Dir, err)
	}
	files := map[string]string{
		"pgbouncer.ini": bouncerIni(cfg, up, user, port),
		"userlist.txt":  fmt.Sprintf("%q \"\"\n", user),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(cfg.Dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("localpg: write %s: %w", name, err)
		}
	}
	return nil
}

// bouncerIni is pgbouncer.ini: every database name a client asks for goes
// to the same upstream server, so that tests can create databases freely.
func bouncerIni(cfg BouncerConfig, up pq.Config, user string, port int) string {
	server := fmt.Sprintf("host=%s port=%d user=%s", quoteIni(cmp.Or(up.Host, "127.0.0.1")), cmp.Or(up.Port, 5432), quoteIni(user))
	if up.Password != "" {
		server += " password=" + quoteIni(up.Password)
	}
	return strings.Join([]string{
		"[databases]",
		"* = " + server,
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		"listen_port = " + strconv.Itoa(port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(cfg.Dir, "userlist.txt"),
		"admin_users = " + user,
		"pool_mode = " + cfg.PoolMode,
		"default_pool_size = " + strconv.Itoa(cfg.PoolSize),
		"max_client_conn = 1000",
		"ignore_startup_parameters = extra_float_digits",
		"log_connections = 0",
		"log_disconnections = 0",
		"",
	}, "\n")
}

// launchBouncer starts PgBouncer on the configuration in dir, logging to
// logPath, as cred's user when set (PgBouncer refuses to run as root). It
// returns the log file open, for the caller to close once PgBouncer has
// exited. In its own process group and killed with this process, it
// never outlives the tests.
func launchBouncer(bin, dir, logPath string, cred *syscall.Credential) (*exec.Cmd, *os.File, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("localpg: open log: %w", err)
	}
	if cred != nil {
		// The configuration must be readable by that user, from a folder it
		// can reach.
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			logFile.Close()
			return nil, nil, fmt.Errorf("localpg: chown %s: %w", dir, err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("localpg: start pgbouncer: %w", err)
	}
	return cmd, logFile, nil
}

func (b *Bouncer) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case werr := <-b.done:
			b.done <- werr
			return fmt.Errorf("localpg: pgbouncer exited during start-up (%v); log:\n%s", werr, tail(b.logPath))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("localpg: pgbouncer not listening after 20s; log:\n%s", tail(b.logPath))
		}
	}
}

// DSN returns a connection string for database name through the pooler.
func (b *Bouncer) DSN(name string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", b.user, b.port, name)
}

// Log returns what PgBouncer has logged so far.
func (b *Bouncer) Log() string {
	out, _ := os.ReadFile(b.logPath)
	return string(out)
}

// Stop shuts PgBouncer down at once (SIGTERM) and waits for it to exit.
func (b *Bouncer) Stop() error {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
		return errors.New("localpg: pgbouncer did not stop within 10s; killed")
	}
}

// quoteIni quotes a value of a PgBouncer connection string.
func quoteIni(v string) string {
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}
