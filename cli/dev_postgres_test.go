package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// devDataDir is a data folder for a test's dev: below /tmp, and 0755 so
// that, as root, the user postgres runs as can reach it and the cluster
// stays in it rather than moving under /var/lib/redrive.
func devDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "redrive-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// When another checkout's cluster holds dev's port, dev starts its own on
// a free port and says so; --reset then refuses while that cluster runs,
// and removes it, the sign-in and the log once it has stopped.
func TestDevPostgresPortFallbackAndReset(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	dataDir := devDataDir(t)
	var out bytes.Buffer
	cluster, err := startDevPostgres(context.Background(), dataDir, port, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	if cluster.Port() == port || cluster.Port() == 0 {
		t.Errorf("the cluster listens on %d; %d was taken", cluster.Port(), port)
	}
	if want := "so this cluster listens on " + strconv.Itoa(cluster.Port()); !strings.Contains(out.String(), want) {
		t.Errorf("dev does not say which port it took (%q):\n%s", want, out.String())
	}
	for _, name := range []string{devSignInFile, devLogFile} {
		if err := os.WriteFile(filepath.Join(dataDir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	reset := func() result { return runCLI(t, nil, "", "dev", "--reset", "--data-dir", dataDir) }
	if r := reset(); r.code != 1 || !strings.Contains(r.stderr, "still runs") {
		t.Errorf("--reset of a running cluster: exit %d, %q", r.code, r.stderr)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	r := reset()
	if r.code != 0 || !strings.Contains(r.stdout, "Removed the dev cluster in "+cluster.Dir()) {
		t.Errorf("--reset: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v), though --reset emptied it", dataDir, err)
	}
	if r := reset(); r.code != 0 || !strings.Contains(r.stdout, "No dev cluster") {
		t.Errorf("--reset again: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
}

// --reset refuses a cluster folder that holds anything but a cluster, and
// leaves it as it was.
func TestDevResetRefusesAFolderThatIsNotACluster(t *testing.T) {
	t.Parallel()
	dataDir := devDataDir(t)
	stray := filepath.Join(dataDir, devClusterDir, "thesis.tex")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("years of work"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, nil, "", "dev", "--reset", "--data-dir", dataDir)
	if r.code != 1 || !strings.Contains(r.stderr, "not a cluster folder") {
		t.Errorf("--reset: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("--reset deleted what it refused: %v", err)
	}
}
