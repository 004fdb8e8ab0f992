// Package e2e holds the browser tests: the real server on a test database,
// driven by Playwright through Debian's Chromium.
//
// `make test` installs what they need (Chromium, Node, the Playwright driver)
// and runs them. To run them alone afterwards:
//
//	go test -count=1 ./e2e/
//
// The driver is taken from PLAYWRIGHT_DRIVER_PATH, else from
// .cache/playwright-driver/<version> at the repository root, where
// `make test` puts it. Nothing is ever downloaded from here, and a missing
// driver or browser fails the tests: it never skips them.
package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/redrive/redrive/store/storetest"
)

// The one Playwright and the one browser of this test binary, started by
// TestMain and shared by every test; each test gets its own context (see
// newPage). Package state because a test binary has exactly one TestMain.
var (
	pw      *playwright.Playwright
	browser playwright.Browser
)

// chromiumPaths are where Debian's chromium package puts the browser. The
// binary in /usr/lib comes first: /usr/bin/chromium is a wrapper script that
// prints a harmless but noisy warning on these machines.
var chromiumPaths = []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"}

// chromiumArgs: --no-sandbox because the tests may run as root (Chromium
// refuses to sandbox as root); the rest keep Chromium off the network,
// which is closed here, and quiet.
var chromiumArgs = []string{
	"--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync",
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts Playwright and Chromium, runs the tests through storetest.Main
// (which owns the test databases), and stops everything. It returns the
// exit code instead of exiting so that its defers run.
func run(m *testing.M) int {
	driverDir, err := findDriver()
	if err != nil {
		return setupFailed("find the Playwright driver", err)
	}
	chromium, err := findChromium()
	if err != nil {
		return setupFailed("find Chromium", err)
	}
	pw, err = playwright.Run(&playwright.RunOptions{
		DriverDirectory:     driverDir,
		SkipInstallBrowsers: true, // only meaningful to Install, which is never called
		Verbose:             false,
	})
	if err != nil {
		return setupFailed("start Playwright from "+driverDir, err)
	}
	defer func() {
		if err := pw.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop Playwright:", err)
		}
	}()
	browser, err = pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(chromium),
		Headless:       playwright.Bool(true),
		Args:           chromiumArgs,
	})
	if err != nil {
		return setupFailed("launch "+chromium, err)
	}
	defer browser.Close()
	return storetest.Main(m)
}

// setupFailed reports why the browser tests cannot run and returns the
// failing exit code: a machine without the browser must not look green.
func setupFailed(what string, err error) int {
	fmt.Fprintf(os.Stderr, "e2e: cannot %s: %v\n"+
		"e2e: the browser tests need Debian's chromium package and the Playwright driver;\n"+
		"e2e: run `make test` once: it installs both (as root) and runs every test.\n", what, err)
	return 1
}

func findChromium() (string, error) {
	for _, p := range chromiumPaths {
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium at %s", strings.Join(chromiumPaths, " or "))
}

// findDriver returns the Playwright driver folder: PLAYWRIGHT_DRIVER_PATH,
// else .cache/playwright-driver/<version> in the repository, where version
// is the Playwright release the playwright-go module pins.
func findDriver() (string, error) {
	dir := os.Getenv("PLAYWRIGHT_DRIVER_PATH")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		version, err := driverVersion(root)
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".cache", "playwright-driver", version)
	}
	for _, need := range []string{"node", filepath.Join("package", "cli.js")} {
		if _, err := os.Stat(filepath.Join(dir, need)); err != nil {
			return "", fmt.Errorf("driver folder %s is incomplete: %w", dir, err)
		}
	}
	return dir, nil
}

// repoRoot walks up from the working directory (the package folder under
// go test) to the folder holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

var cliVersionPattern = regexp.MustCompile(`playwrightCliVersion\s*=\s*"([^"]+)"`)

// driverVersion reads the Playwright version the module expects from its
// run.go, as the Makefile does, so the two never disagree.
func driverVersion(root string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/playwright-community/playwright-go")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locate the playwright-go module: %w", err)
	}
	src, err := os.ReadFile(filepath.Join(string(bytes.TrimSpace(out)), "run.go"))
	if err != nil {
		return "", err
	}
	m := cliVersionPattern.FindSubmatch(src)
	if m == nil {
		return "", errors.New("no playwrightCliVersion in playwright-go's run.go")
	}
	return string(m[1]), nil
}
