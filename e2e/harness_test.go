package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/store/storetest"
)

// Helpers every browser test uses: a server per test, a page per test,
// screenshots for people to look at.

// defaultTimeout bounds each Playwright action and auto-retrying assertion
// that does not set its own: long enough for a CI machine running every
// test package at once on 2 cores (15 s was not, once), short enough that a
// broken page fails in seconds rather than minutes. A passing assertion
// returns as soon as it holds, so only failures pay for the length.
const defaultTimeout = 30 * time.Second

// screenshotDir is where screenshot saves, relative to this package (go
// test runs in it); git ignores it.
const screenshotDir = "screenshots"

// newPage returns a page in a fresh browser context (its own cookies and
// storage) with a desktop-sized viewport, closed when the test ends.
func newPage(t *testing.T) playwright.Page {
	t.Helper()
	return newPageWith(t, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: 1280, Height: 800},
	})
}

// newPageWith is newPage with the context's options (viewport, color
// scheme, locale...) chosen by the test.
func newPageWith(t *testing.T, opts playwright.BrowserNewContextOptions) playwright.Page {
	t.Helper()
	bctx, err := browser.NewContext(opts)
	if err != nil {
		t.Fatalf("new browser context: %v", err)
	}
	// Cleanup, not defer: it also runs when parallel subtests outlive the
	// function that made the page, and on t.Fatal.
	t.Cleanup(func() {
		if err := bctx.Close(); err != nil {
			t.Logf("close browser context: %v", err)
		}
	})
	bctx.SetDefaultTimeout(float64(defaultTimeout.Milliseconds()))
	page, err := bctx.NewPage()
	if err != nil {
		t.Fatalf("new page: %v", err)
	}
	return page
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshotTimeout bounds one capture. A full-page capture needs the
// browser's compositor, which a CI machine running every test package at
// once can starve for longer than defaultTimeout; the page is already
// there, so waiting longer costs only time.
const screenshotTimeout = 45 * time.Second

// screenshot saves a full-page PNG as e2e/screenshots/<name>.png, for
// people to look at. It asserts nothing about the page, so a capture that
// fails (a timeout on a starved machine) is logged, not a test failure:
// the assertions around it judge the page.
func screenshot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Logf("screenshot %s not saved: %v", name, err)
		return
	}
	path := filepath.Join(screenshotDir, unsafeFileChars.ReplaceAllString(name, "_")+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{
		Path:     playwright.String(path),
		FullPage: playwright.Bool(true),
		Timeout:  playwright.Float(float64(screenshotTimeout.Milliseconds())),
	}); err != nil {
		t.Logf("screenshot %s not saved: %v", name, err)
	}
}

// startServer serves the console on db at a free port of 127.0.0.1, built
// as `redrive serve` builds it, and returns its base URL. The server stops
// when the test ends. Warnings and errors the server logs go to the test's
// output, so a 500 in a browser test comes with its cause.
func startServer(t *testing.T, db *storetest.DB) string {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e"})
	return base
}

// serveConsole builds the console with redrive.NewConsole, as `redrive serve`
// does, serves it on a free port of 127.0.0.1 and runs what runs beside it
// (the bulk-operation runner) until the test ends. It returns the base URL.
func serveConsole(t *testing.T, cfg redrive.ConsoleConfig) (string, *redrive.Console) {
	t.Helper()
	return serveConsoleOn(t, listenLocal(t), cfg)
}

// listenLocal opens a listener on a free port of 127.0.0.1, for a test
// that must know the console's address before building it (its links).
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ln
}

// serveConsoleOn is serveConsole on a listener the test opened.
func serveConsoleOn(t *testing.T, ln net.Listener, cfg redrive.ConsoleConfig) (string, *redrive.Console) {
	t.Helper()
	logger := cfg.Logger
	ctx, cancel := context.WithCancel(context.Background())
	console, err := redrive.NewConsole(ctx, cfg)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("build console: %v", err)
	}
	handler := console.Handler
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served, ran := make(chan error, 1), make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	go func() { ran <- console.Run(ctx) }()
	t.Cleanup(func() {
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if err := srv.Shutdown(shutdown); err != nil {
			t.Errorf("stop server: %v", err)
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("server: %v", err)
		}
		cancel()
		if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("console: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), console
}

// TestHarnessServesHealth checks the harness itself end to end: a server on
// a test database, a browser page, a screenshot.
func TestHarnessServesHealth(t *testing.T) {
	t.Parallel()
	base := startServer(t, storetest.NewDB(t))
	page := newPage(t)
	resp, err := page.Goto(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status() != http.StatusOK {
		t.Fatalf("GET /healthz: status %d, want 200", resp.Status())
	}
	body, err := page.Locator("body").TextContent()
	if err != nil {
		t.Fatal(err)
	}
	if body != "ok" {
		t.Fatalf("GET /healthz: body %q, want \"ok\"", body)
	}
	screenshot(t, page, "harness-healthz")
}
