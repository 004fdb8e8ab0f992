package localpg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// originFile, in a cluster folder under SharedRoot, names the folder it
// stands for.
const originFile = "ORIGIN"

// clusterEntries is everything Start leaves in a cluster folder. Remove
// deletes a folder only if it holds nothing else, so a mistyped Dir (a home
// folder, a checkout) is refused rather than emptied.
var clusterEntries = []string{"data", "postgres.log", originFile}

// Remove deletes the folder the cluster of cfg lives in, found as Start
// finds it (under SharedRoot when it moved there, even once cfg.Dir is
// gone), and returns that folder; "" when there is none. A SharedRoot left
// empty goes too. It refuses a folder that holds anything but a cluster
// Start made, and one whose server still runs: stopping it is for whoever
// started it.
func Remove(ctx context.Context, cfg Config) (string, error) {
	if cfg.Dir == "" {
		return "", errors.New("localpg: Dir is required")
	}
	cred, err := credential(cmp.Or(cfg.RunAsUser, "postgres"))
	if err != nil {
		return "", err
	}
	dir, shared, err := locate(ctx, cfg, cred)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("localpg: %w", err)
	}
	if err := checkCluster(dir); err != nil {
		return "", err
	}
	if pid, ok := serverPID(dir); ok {
		return "", fmt.Errorf("localpg: PostgreSQL (pid %d) still runs on %s: stop it first", pid, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("localpg: remove %s: %w", dir, err)
	}
	if shared {
		// SharedRoot too, once its last cluster is gone: Start made it for
		// them. os.Remove leaves a folder that still holds anything.
		_ = os.Remove(filepath.Dir(dir))
	}
	return dir, nil
}

// checkCluster makes sure dir is a cluster folder as Start leaves it: an
// initialised data folder, and nothing Start does not write.
func checkCluster(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("localpg: %w", err)
	}
	for _, e := range entries {
		if !slices.Contains(clusterEntries, e.Name()) {
			return fmt.Errorf("localpg: %s holds %s, so it is not a cluster folder of Redrive's: not removing it", dir, e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
		return fmt.Errorf("localpg: %s has no initialised data folder, so it is not a cluster folder of Redrive's: not removing it", dir)
	}
	return nil
}

// serverPID reports the postmaster that postmaster.pid in dir names, if
// that process is alive. A stale file (after a crash or a reboot) names a
// dead process; postgres itself decides the same way at start.
func serverPID(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0, false
	}
	// Signal 0 checks that the process exists; EPERM means it does, as
	// another user's.
	if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
		return pid, true
	}
	return 0, false
}
