package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// FindBaseBackup locates pg_basebackup beside the server binaries; its
// error says how to install it.
func FindBaseBackup() (string, error) {
	bindir, err := FindBinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(bindir, "pg_basebackup")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("localpg: no pg_basebackup in %s (it comes with the postgresql package): %w", bindir, err)
	}
	return path, nil
}

// StartReplica starts a streaming replica of the running cluster c: a base
// backup of c taken with `pg_basebackup -R` (which writes standby.signal
// and primary_conninfo, so the copy starts as a hot standby that follows
// c) into cfg.Dir/data, then a second postgres on a port of its own. An
// existing data folder in cfg.Dir is reused as it is, so a stopped replica
// starts again where it left off.
//
// The primary needs nothing beyond what Start gives it: wal_level replica
// and max_wal_senders 10 are PostgreSQL's defaults, and the pg_hba.conf that
// initdb --auth=trust writes lets local connections replicate, as the
// postgres superuser may.
func (c *Cluster) StartReplica(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localpg: Dir is required")
	}
	if cfg.RunAsUser == "" {
		cfg.RunAsUser = c.cfg.RunAsUser
	}
	basebackup, err := FindBaseBackup()
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
	if err := c.baseBackup(ctx, basebackup, dataDir, cred); err != nil {
		return nil, err
	}
	r := &Cluster{cfg: cfg, port: port, done: make(chan error, 1), moved: moved}
	if err := r.start(ctx, filepath.Dir(basebackup), dataDir, cred); err != nil {
		return nil, err
	}
	return r, nil
}

// baseBackup copies c into dataDir, unless dataDir already holds a cluster.
func (c *Cluster) baseBackup(ctx context.Context, basebackup, dataDir string, cred *syscall.Credential) error {
	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		return nil // an earlier copy: it catches up by streaming
	}
	// pg_basebackup makes dataDir itself (mode 0700) and wants it absent or
	// empty; its parent must be writable by the user it runs as.
	if cred != nil {
		if err := os.Chown(filepath.Dir(dataDir), int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("localpg: chown replica folder: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, basebackup,
		"-h", "127.0.0.1", "-p", strconv.Itoa(c.port), "-U", "postgres",
		"-D", dataDir, "-R", "--wal-method=stream", "--checkpoint=fast", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("localpg: pg_basebackup of port %d into %s: %w\n%s", c.port, dataDir, err, out.String())
	}
	return nil
}
