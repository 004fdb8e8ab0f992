package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/redrive/redrive/internal/localpg"
	"github.com/redrive/redrive/store/postgres"
)

// devPostgresPort is the dev cluster's port when it is free: one port from
// start to start keeps the database URL a person has copied working. When
// another checkout's dev holds it, dev takes a free port instead.
const devPostgresPort = 54329

// devClusterDir is the private cluster's folder in --data-dir (localpg may
// move it: Cluster.Dir says where).
const devClusterDir = "postgres"

// startDevPostgres starts (or reuses) the private cluster of dataDir, on
// port when it is free, and makes its redrive database.
func startDevPostgres(ctx context.Context, dataDir string, port int, w io.Writer) (*localpg.Cluster, error) {
	dir := filepath.Join(dataDir, devClusterDir)
	fmt.Fprintf(w, "Starting a private PostgreSQL for %s ...\n", dir)
	cluster, err := localpg.Start(ctx, localpg.Config{Dir: dir, Port: devPort(port), Durable: true})
	if err != nil {
		return nil, fmt.Errorf("dev postgres: %w", err)
	}
	if why := cluster.Moved(); why != "" {
		fmt.Fprintf(w, "%s.\n", why)
	}
	if cluster.Port() != port {
		fmt.Fprintf(w, "Port %d is taken (another checkout's dev?), so this cluster listens on %d.\n", port, cluster.Port())
	}
	fmt.Fprintf(w, "PostgreSQL data: %s\n", cluster.Dir())
	if err := postgres.EnsureDatabase(ctx, cluster.DSN("postgres"), "redrive"); err != nil {
		return nil, errors.Join(fmt.Errorf("dev postgres: %w", err), cluster.Stop())
	}
	return cluster, nil
}

// devPort is the port to start the cluster on: port when nothing listens
// on it, else 0, which has localpg pick a free one. A port in use is
// usually another clone's cluster; localpg would refuse it.
func devPort(port int) int {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0
	}
	l.Close()
	return port
}

// resetDev removes what dev keeps in dataDir between starts: the private
// cluster, wherever localpg put it (also under /var/lib/redrive, and also
// once the checkout is gone), the sign-in and the log; then dataDir itself
// if that left it empty. It refuses while the cluster runs, and a folder
// that is not a cluster (localpg.Remove).
func resetDev(dataDir string, w io.Writer) error {
	removed, err := localpg.Remove(localpg.Config{Dir: filepath.Join(dataDir, devClusterDir)})
	if err != nil {
		return fmt.Errorf("dev --reset: %w", err)
	}
	if len(removed) == 0 {
		fmt.Fprintf(w, "No dev cluster for %s.\n", dataDir)
	}
	for _, dir := range removed {
		fmt.Fprintf(w, "Removed the dev cluster in %s.\n", dir)
	}
	for _, name := range []string{devSignInFile, devLogFile} {
		if err := os.Remove(filepath.Join(dataDir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("dev --reset: %w", err)
		}
	}
	// Only an empty folder: anything else in it is not dev's to delete.
	if err := os.Remove(dataDir); err == nil {
		fmt.Fprintf(w, "Removed %s.\n", dataDir)
	}
	return nil
}
