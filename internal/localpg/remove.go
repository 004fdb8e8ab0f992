package localpg

import (
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

// Remove deletes the cluster of cfg wherever Start may have put it: in
// cfg.Dir, and in its folder under SharedRoot (sharedDir). It looks in both
// rather than asking, as Start does, whether postgres can reach cfg.Dir:
// once the checkout, or the private folder around it, is deleted, the
// answer changes but the moved cluster is still there. It returns the
// folders it removed, none when there was nothing to do; a SharedRoot left
// empty goes too. It removes nothing if any folder holds anything but a
// cluster Start made, or has its server still running: stopping it is for
// whoever started it.
func Remove(cfg Config) ([]string, error) {
	if cfg.Dir == "" {
		return nil, errors.New("localpg: Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("localpg: %w", err)
	}
	shared := sharedDir(cfg, dir)
	var found []string
	for _, d := range []string{dir, shared} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("localpg: %w", err)
		}
		if err := checkCluster(d); err != nil {
			return nil, err
		}
		if pid, ok := serverPID(d); ok {
			return nil, fmt.Errorf("localpg: PostgreSQL (pid %d) still runs on %s: stop it first", pid, d)
		}
		found = append(found, d)
	}
	for _, d := range found {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("localpg: remove %s: %w", d, err)
		}
		if d == shared {
			// SharedRoot too, once its last cluster is gone: Start made it
			// for them. os.Remove leaves a folder that still holds anything.
			_ = os.Remove(filepath.Dir(d))
		}
	}
	return found, nil
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
