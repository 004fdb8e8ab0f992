package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker/demo"
)

// `redrive dev` against a test database: the banner names a sign-in file
// that holds a password that works, each dead letter goes to the log file
// and not to the terminal, and Ctrl-C says what it stops, ends with
// "stopped", and logs no error.
func TestDevSignInQuietLettersAndCleanStop(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := store.Queue.RegisterTasks(ctx, []string{demo.TaskAlwaysFail}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Queue.Enqueue(ctx, dlq.EnqueueParams{Task: demo.TaskAlwaysFail, Queue: "default", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	dataDir := devDataDir(t)
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"dev", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--demo-rate", "0.1"},
			func(k string) string { return map[string]string{"DATABASE_URL": db.DSN}[k] }, strings.NewReader(""), stdout, stderr)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	})
	storetest.WaitFor(t, 30*time.Second, "the banner", func() bool { return strings.Contains(stdout.String(), "Press Ctrl-C to stop.") })

	signIn := filepath.Join(dataDir, devSignInFile)
	if !strings.Contains(stdout.String(), "The sign-in is also in "+signIn+".") {
		t.Errorf("the banner does not name %s:\n%s", signIn, stdout)
	}
	st, err := os.Stat(signIn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", signIn, st.Mode().Perm())
	}
	content, err := os.ReadFile(signIn)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^url: (http://127\.0\.0\.1:\d+)\nuser: admin\npassword: (\S+)$`).FindStringSubmatch(string(content))
	if m == nil {
		t.Fatalf("%s:\n%s", signIn, content)
	}
	if !strings.Contains(stdout.String(), "Redrive is running: "+m[1]) || !strings.Contains(stdout.String(), "the password "+m[2]+" ") {
		t.Errorf("the sign-in file and the banner disagree:\n%s\n%s", content, stdout)
	}
	admin, err := store.Access.UserByName(ctx, devAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if !dlq.CheckPassword(&admin, m[2]) {
		t.Errorf("the password in %s does not sign in", signIn)
	}

	logPath := filepath.Join(dataDir, devLogFile)
	storetest.WaitFor(t, 30*time.Second, logPath+" to log a dead letter", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), deadLetteredMsg)
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("dev exited %d:\n%s", code, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop within 30s of Ctrl-C")
	}
	if strings.Contains(stderr.String(), deadLetteredMsg) {
		t.Errorf("a dead letter on the terminal:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "level=ERROR") {
		t.Errorf("stopping logged an error:\n%s", stderr)
	}
	out := stdout.String()
	if !strings.Contains(out, "Stopping the console, the demo producer and the worker") || !strings.HasSuffix(out, "Redrive dev stopped.\n") {
		t.Errorf("stopping did not say so:\n%s", out)
	}
}

// On the terminal, dev counts the dead-lettered lines once an interval
// instead of printing each (they stay in the file, with what the worker's
// loggers added); other lines show as they are.
func TestDevLogCountsDeadLettersOnTheTerminal(t *testing.T) {
	t.Parallel()
	fs := newFlagSet("test", "", &bytes.Buffer{})
	register(fs, databaseOptions)
	f, err := parse(fs, []string{"--log-level", "warn"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	terminal := &lockedBuffer{}
	log, err := openDevLog(f, t.TempDir(), terminal)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	logger := log.Logger()
	jobLogger := logger.With("job_id", 7)
	jobLogger.Warn(deadLetteredMsg, "dead_letter_id", 3)
	jobLogger.WithGroup("g").Warn(deadLetteredMsg, "dead_letter_id", 4)
	logger.Warn("queue paused")
	logger.Info("job failed; retrying") // below the level

	file, err := os.ReadFile(log.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(file), "job_id=7"); got != 2 || !strings.Contains(string(file), "queue paused") {
		t.Errorf("the file lacks lines:\n%s", file)
	}
	if strings.Contains(terminal.String(), deadLetteredMsg) || !strings.Contains(terminal.String(), "queue paused") ||
		strings.Contains(terminal.String()+string(file), "retrying") {
		t.Errorf("terminal:\n%s", terminal)
	}

	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		log.summarise(ctx, out, 10*time.Millisecond, "console http://x")
	}()
	storetest.WaitFor(t, 10*time.Second, "a count", func() bool { return strings.Contains(out.String(), "\n") })
	jobLogger.Warn(deadLetteredMsg)
	storetest.WaitFor(t, 10*time.Second, "a second count", func() bool { return strings.Count(out.String(), "\n") == 2 })
	cancel()
	<-stopped
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\d\d:\d\d 2 jobs dead-lettered since the last count, 2 since start; console http://x$`),
		regexp.MustCompile(`^\d\d:\d\d 1 job dead-lettered since the last count, 3 since start; console http://x$`),
	}
	for i, re := range want {
		if i >= len(lines) || !re.MatchString(lines[i]) {
			t.Errorf("count %d: want %s in:\n%s", i+1, re, out)
		}
	}
}
