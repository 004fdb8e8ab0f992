package localpg_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redrive/redrive/internal/localpg"
)

// Remove finds the cluster where Start put it — under SharedRoot when, as
// root, the folder asked for is below a private one — refuses while its
// server runs, and then deletes it, even once the folder asked for and the
// private folder around it are gone.
func TestRemoveFindsTheClusterWhereStartPutIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	private, err := os.MkdirTemp("", "localpg-home-") // mode 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	shared, err := os.MkdirTemp("", "localpg-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := localpg.Config{Dir: filepath.Join(private, "clone", ".redrive", "postgres"), SharedRoot: shared}
	c, err := localpg.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()

	if _, err := localpg.Remove(cfg); err == nil || !strings.Contains(err.Error(), "still runs") {
		t.Fatalf("Remove of a running cluster: %v, want a refusal", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	// The clone and the private folder are deleted; the cluster, if it
	// moved, is still there. Remove must not ask whether postgres can reach
	// the clone: now it could (/tmp), so the answer is no longer Start's.
	if err := os.RemoveAll(private); err != nil {
		t.Fatal(err)
	}
	removed, err := localpg.Remove(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.Moved() != "" && (len(removed) != 1 || removed[0] != c.Dir()) {
		t.Errorf("removed %q, but the cluster lived in %s", removed, c.Dir())
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("%s is still there (%v)", c.Dir(), err)
	}
	if _, err := os.Stat(shared); c.Moved() != "" && !os.IsNotExist(err) {
		t.Errorf("the shared root %s, empty now, is still there (%v)", shared, err)
	}
	if removed, err := localpg.Remove(cfg); len(removed) != 0 || err != nil {
		t.Errorf("a second Remove: %q, %v; want nothing to do", removed, err)
	}
}

// A folder that holds anything Start does not write, or no initialised
// cluster, is not removed: a mistyped folder must not be emptied.
func TestRemoveRefusesAFolderThatIsNotACluster(t *testing.T) {
	t.Parallel()
	for name, files := range map[string][]string{
		"StrayFile": {"data/PG_VERSION", "notes.txt"},
		"NoCluster": {"postgres.log"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, err := os.MkdirTemp("", "localpg-not-") // reachable below /tmp, so not moved
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			for _, f := range files {
				path := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("17\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := localpg.Remove(localpg.Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "not a cluster") {
				t.Errorf("Remove: %v, want a refusal", err)
			}
			if _, err := os.Stat(filepath.Join(dir, files[0])); err != nil {
				t.Errorf("Remove deleted what it refused: %v", err)
			}
		})
	}
}
