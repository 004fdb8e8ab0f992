package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	redrive "github.com/redrive/redrive/cli"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
)

// debianPython is the Python the Celery integration runs on: Debian's,
// with Debian's python3-celery (another Python may come first on PATH).
const debianPython = "/usr/bin/python3"

// celeryDir is the integration's package, from this folder.
var celeryDir, _ = filepath.Abs("../integrations/celery")

// needCelery stops the test with what to install when Debian's Celery or
// Redis is missing (make test installs them when run as root).
func needCelery(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import celery, redis").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import celery and redis (%v: %s): run make test as root, or apt-get install python3-celery python3-redis redis-server",
			debianPython, err, bytes.TrimSpace(out))
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/sbin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no redis-server: apt-get install redis-server")
	return ""
}

// startRedis runs a Redis of the test's own on a free port, with nothing
// kept on disk, until the test ends; it returns its URL.
func startRedis(t *testing.T, server string) string {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitUntil(t, 10*time.Second, "redis to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "redis://" + addr + "/0"
}

// rabbitServer is Debian's RabbitMQ, "" when it is not installed (make
// test installs it when run as root).
func rabbitServer() string {
	if _, err := os.Stat("/usr/lib/rabbitmq/bin/rabbitmq-server"); err != nil {
		return ""
	}
	return "/usr/lib/rabbitmq/bin/rabbitmq-server"
}

// startRabbit runs a RabbitMQ of the test's own (its own node, ports,
// files and Erlang port mapper) until the test ends; it returns its URL.
func startRabbit(t *testing.T, server string) string {
	t.Helper()
	dir := t.TempDir()
	port, epmd := freePort(t), freePort(t)
	name := fmt.Sprintf("redrive%d@localhost", port)
	cmd := exec.Command(server)
	cmd.Env = append(os.Environ(), "HOME="+dir, "RABBITMQ_NODENAME="+name, fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port),
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", freePort(t)), fmt.Sprintf("ERL_EPMD_PORT=%d", epmd),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "none"), "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "plugins"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// rabbitmq-server is a script that starts Erlang's VM: a group of its
	// own is killed whole, and the wait for the output it shares is bounded.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rabbitmq: %v", err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		// Its Erlang port mapper, a daemon of its own port, goes too.
		if epmdBin, _ := filepath.Glob("/usr/lib/erlang/erts-*/bin/epmd"); len(epmdBin) > 0 {
			kill := exec.Command(epmdBin[0], "-kill")
			kill.Env = append(os.Environ(), fmt.Sprintf("ERL_EPMD_PORT=%d", epmd))
			_ = kill.Run()
		}
		if t.Failed() {
			t.Logf("rabbitmq's output:\n%s", out.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitUntil(t, 60*time.Second, "rabbitmq to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "amqp://guest:guest@" + addr + "//"
}

// freePort is a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitUntil polls cond every 50 ms for up to d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shopSource configures the Celery app's source, shop, and returns a
// token that sends its letters and takes its replays only.
func shopSource(t *testing.T, db *storetest.DB, store *storetest.Stores) string {
	t.Helper()
	ctx := context.Background()
	must(t, store.Sources.Configure(ctx, []dlq.Source{{Name: "shop", Kind: dlq.SourceKindCelery}}))
	ensureUser(t, db, "celery", dlq.RoleOperator)
	token, err := dlq.NewTokenSecret()
	must(t, err)
	_, err = store.Access.CreateToken(ctx, dlq.NewToken{UserName: "celery", Label: "shop's workers", Sources: []string{"shop"},
		Hash: dlq.HashToken(token), Actor: dlq.Actor{Name: "e2e"}, Now: time.Now()})
	must(t, err)
	return token
}

// shop runs the tests' Celery app (integrations/celery/tests/shop.py).
type shop struct {
	env []string
	dir string
}

func newShop(t *testing.T, broker string, env ...string) shop {
	t.Helper()
	return shop{dir: filepath.Join(celeryDir, "tests"), env: append(os.Environ(),
		append([]string{"PYTHONPATH=" + celeryDir + string(os.PathListSeparator) + filepath.Join(celeryDir, "tests"),
			"SHOP_BROKER=" + broker, "PYTHONDONTWRITEBYTECODE=1"}, env...)...)}
}

// worker starts a Celery worker of the shop until the test ends.
func (s shop) worker(t *testing.T) {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(debianPython, "-m", "celery", "-A", "shop", "worker", "--pool=solo", "--concurrency=1",
		"--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=WARNING")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.dir, s.env, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the celery worker: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("celery worker's output:\n%s", out.String())
		}
	})
}

// send runs Python in the shop's app: enqueueing tasks.
func (s shop) send(t *testing.T, code string) {
	t.Helper()
	cmd := exec.Command(debianPython, "-c", "import shop\n"+code)
	cmd.Dir, cmd.Env = s.dir, s.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("enqueue: %v: %s", err, out)
	}
}

// A Celery app with the one-line set-up sends Redrive the tasks that fail
// for good, and none that will still be retried: a task that exhausted its
// retries (three attempts, each one's error), one that raised what it does
// not retry (one attempt), while one that failed once and then succeeded
// never appears. Redrive is down for a minute when they die: the letters
// wait in the worker's spool, the worker works on, and they arrive once it
// is up, each once; a later failure arrives within two seconds.
func TestCeleryTasksThatFailForGoodBecomeLetters(t *testing.T) {
	t.Parallel()
	redis := needCelery(t)
	broker := startRedis(t, redis)
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	token := shopSource(t, db, store)

	// The console's address, with nothing listening there yet: Redrive is down.
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	tmp := t.TempDir()
	s := newShop(t, broker, "REDRIVE_URL=http://"+addr, "REDRIVE_TOKEN="+token, "REDRIVE_SOURCE=shop",
		"REDRIVE_SPOOL="+filepath.Join(tmp, "spool.sqlite"), "REDRIVE_BACKOFF_CAP=1")
	s.worker(t)
	down := time.Now()
	notified := filepath.Join(tmp, "notified")
	s.send(t, fmt.Sprintf(`shop.ship.delay("ord_7101")
shop.charge.delay("ord_7102", 4200)
shop.notify.delay("ord_7103", %q)`, notified))

	// The three run while Redrive is down: notify succeeds at its second
	// attempt, ship's retries run out, charge fails at once.
	waitUntil(t, 30*time.Second, "notify to succeed on its retry", func() bool {
		_, err := os.Stat(notified)
		return err == nil
	})
	waitUntil(t, 30*time.Second, "two letters in the spool", func() bool {
		out, err := exec.Command(debianPython, "-c", fmt.Sprintf(
			"import sqlite3; print(sqlite3.connect(%q).execute('SELECT count(*) FROM letters').fetchone()[0])",
			filepath.Join(tmp, "spool.sqlite"))).Output()
		return err == nil && strings.TrimSpace(string(out)) == "2"
	})
	// Redrive stays down for a minute, the worker trying every second or
	// so (REDRIVE_BACKOFF_CAP=1) and working on meanwhile.
	var letters int
	for time.Since(down) < time.Minute {
		time.Sleep(time.Second)
	}
	must(t, db.Get(&letters, `SELECT count(*) FROM dead_letter_records`))
	if letters != 0 {
		t.Fatalf("%d letters while Redrive was down", letters)
	}
	s.send(t, fmt.Sprintf(`shop.notify.delay("ord_7105", %q)`, notified+"-2"))
	waitUntil(t, 30*time.Second, "the worker to go on working", func() bool {
		_, err := os.Stat(notified + "-2")
		return err == nil
	})

	// Redrive is up after a minute down: the spool is sent.
	ln, err := net.Listen("tcp", addr)
	must(t, err)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	serveConsoleOn(t, ln, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "shop", Kind: dlq.SourceKindCelery}}}})
	waitUntil(t, 15*time.Second, "the spooled letters to arrive", func() bool {
		return db.Get(&letters, `SELECT count(*) FROM dead_letter_records`) == nil && letters == 2
	})

	type row struct {
		Task        string `db:"task"`
		Queue       string `db:"queue"`
		Class       string `db:"error_class"`
		Message     string `db:"error_message"`
		Traceback   string `db:"traceback"`
		Attempts    int    `db:"attempts"`
		MaxAttempts int    `db:"max_attempts"`
		Reason      string `db:"reason"`
		History     string `db:"history"`
		Args        string `db:"args"`
	}
	get := func(task string) row {
		t.Helper()
		var r row
		must(t, db.Get(&r, `SELECT task, queue, error_class, error_message, traceback, attempts, max_attempts, reason,
			history::text AS history, args::text AS args FROM dead_letters WHERE task = $1`, task))
		return r
	}
	ship := get("shop.ship")
	if ship.Class != "shop.CourierDown" || ship.Attempts != 3 || ship.MaxAttempts != 3 || ship.Reason != "exhausted" ||
		ship.Queue != "celery" || !strings.Contains(ship.Traceback, "raise CourierDown") || ship.Args != `["ord_7101"]` ||
		strings.Count(ship.History, `"outcome": "retry"`)+strings.Count(ship.History, `"outcome":"retry"`) != 2 {
		t.Errorf("ship's letter: %+v", ship)
	}
	charge := get("shop.charge")
	if charge.Class != "ValueError" || charge.Attempts != 1 || charge.Reason != "permanent" ||
		!strings.Contains(charge.Message, "insufficient funds") || !strings.Contains(charge.Traceback, "ValueError") {
		t.Errorf("charge's letter: %+v", charge)
	}
	var notifies int
	must(t, db.Get(&notifies, `SELECT count(*) FROM dead_letter_records WHERE task = 'shop.notify'`))
	if notifies != 0 {
		t.Error("a task that succeeded on its retry became a letter")
	}
	var ids []string
	must(t, db.Select(&ids, `SELECT external_id FROM letter_sources WHERE source = 'shop' ORDER BY external_id`))
	if len(ids) != 2 {
		t.Errorf("letters of shop: %v", ids)
	}

	// Redrive up: a task that fails now is a letter within two seconds.
	start := time.Now()
	s.send(t, `shop.charge.delay("ord_7104", 999)`)
	waitUntil(t, 10*time.Second, "the new letter", func() bool {
		return db.Get(&letters, `SELECT count(*) FROM dead_letter_records`) == nil && letters == 3
	})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a task that failed for good took %s to become a letter, want at most 2 s", took.Round(time.Millisecond))
	} else {
		t.Logf("a failed task became a letter %s after it was enqueued", took.Round(time.Millisecond))
	}
}

// Once the fix shipped, a replay from the console runs the Celery app's
// tasks again on its real workers: two workers race to take the replays
// of a group replay with a canary and a pace, and each order ships exactly
// once; the operation settles on what the workers report. A replay with
// edited arguments that dies again comes back as a new letter naming the
// one it replays.
func TestCeleryReplayFromTheConsole(t *testing.T) {
	t.Parallel()
	redis := needCelery(t)
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		celeryReplay(t, startRedis(t, redis))
	})
	t.Run("RabbitMQ", func(t *testing.T) {
		t.Parallel()
		server := rabbitServer()
		if server == "" {
			t.Skip("no rabbitmq-server: make test installs it when run as root (apt-get install rabbitmq-server)")
		}
		celeryReplay(t, startRabbit(t, server))
	})
}

// celeryReplay is TestCeleryReplayFromTheConsole on one broker.
func celeryReplay(t *testing.T, broker string) {
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	token := shopSource(t, db, store)
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	base, _ := serveConsole(t, redrive.ConsoleConfig{DB: db.DB, Logger: logger, Version: "e2e",
		Sources: []redrive.SourceConfig{{Source: dlq.Source{Name: "shop", Kind: dlq.SourceKindCelery}}}})
	tmp := t.TempDir()
	shipped, fixedFile := filepath.Join(tmp, "shipped"), filepath.Join(tmp, "fixed")
	for i := range 2 {
		s := newShop(t, broker, "REDRIVE_URL="+base, "REDRIVE_TOKEN="+token, "REDRIVE_SOURCE=shop",
			fmt.Sprintf("REDRIVE_SPOOL=%s/spool-%d.sqlite", tmp, i), "REDRIVE_BACKOFF_CAP=1",
			"SHOP_FIXED="+fixedFile, "SHOP_SHIPPED="+shipped)
		s.worker(t)
	}
	s := newShop(t, broker)
	const n = 6
	var orders []string
	for i := range n {
		orders = append(orders, fmt.Sprintf("shop.ship.delay(\"ord_%d\")", 7200+i))
	}
	s.send(t, strings.Join(orders, "\n")+"\nshop.charge.delay(\"ord_7299\", 100)")
	waitUntil(t, 60*time.Second, "the letters", func() bool {
		var got int
		return db.Get(&got, `SELECT count(*) FROM dead_letter_records`) == nil && got == n+1
	})

	// The fix ships; the group is replayed, two first, then four a second.
	must(t, os.WriteFile(fixedFile, nil, 0o644))
	operator := apiOperator(t, db, store)
	res := apiPost(t, base, operator, "/api/v1/dead-letters/replay",
		`{"filter": {"source": "shop", "task": "shop.ship"}, "canary": 2, "rate_per_second": 4, "reason": "courier token renewed", "wait_seconds": 0}`)
	opID := int64(res["operation_id"].(float64))
	waitOperation(t, base, operator, opID, "canary", 60*time.Second)
	apiPost(t, base, operator, fmt.Sprintf("/api/v1/operations/%d/release", opID), `{}`)
	op := waitOperation(t, base, operator, opID, "done", 60*time.Second)
	replays := op["replays"].(map[string]any)
	if replays["succeeded"] != float64(n) || replays["died_again"] != float64(0) {
		t.Errorf("the operation settled with replays %v; want %d succeeded", replays, n)
	}
	lines, err := os.ReadFile(shipped)
	must(t, err)
	runs := map[string]int{}
	for _, l := range strings.Fields(string(lines)) {
		runs[l]++
	}
	if len(runs) != n {
		t.Errorf("orders shipped: %v; want each of the %d once", runs, n)
	}
	for order, k := range runs {
		if k != 1 {
			t.Errorf("order %s shipped %d times", order, k)
		}
	}

	if strings.HasPrefix(broker, "redis") {
		// What the operator saw: the operation settled, and the charge's
		// letter offering a replay by the app's workers, arguments editable.
		page := newPage(t)
		signIn(t, page, base, db, dlq.RoleOperator)
		_, err := page.Goto(fmt.Sprintf("%s/operations/%d", base, opID))
		must(t, err)
		must(t, expect.Locator(byTestID(page, "op-settled-count")).ToContainText(fmt.Sprintf("%d of %d settled", n, n)))
		screenshot(t, page, "celery-group-replay-settled")
		var letter int64
		must(t, db.Get(&letter, `SELECT id FROM dead_letter_records WHERE task = 'shop.charge'`))
		_, err = page.Goto(fmt.Sprintf("%s/dead-letters/%d", base, letter))
		must(t, err)
		must(t, expect.Locator(byTestID(page, "replay-in-source")).ToContainText("published again through its broker"))
		must(t, expect.Locator(byTestID(page, "edit-details")).ToHaveCount(1))
		screenshot(t, page, "celery-letter")
	}

	// The declined charge, replayed with an edited amount, dies again: a
	// new letter names the one it replays, and the replay is died again.
	var charge int64
	must(t, db.Get(&charge, `SELECT id FROM dead_letter_records WHERE task = 'shop.charge'`))
	apiPost(t, base, operator, fmt.Sprintf("/api/v1/dead-letters/%d/replay", charge), `{"args": ["ord_7299", 50], "reason": "try a smaller amount"}`)
	waitUntil(t, 30*time.Second, "the replay to die again", func() bool {
		var state string
		return db.Get(&state, `SELECT state FROM source_replays WHERE dead_letter_id = $1`, charge) == nil && state == "died_again"
	})
	var again struct {
		Args     string `db:"args"`
		ReplayOf *int64 `db:"replay_of"`
	}
	waitUntil(t, 30*time.Second, "the letter of the replay", func() bool {
		return db.Get(&again, `SELECT args::text AS args, replay_of FROM dead_letter_records WHERE task = 'shop.charge' AND id <> $1`, charge) == nil
	})
	if again.ReplayOf == nil || *again.ReplayOf != charge || again.Args != `["ord_7299", 50]` {
		t.Errorf("the replay's letter: args %s, replay of %v; want the edited args, replay of %d", again.Args, again.ReplayOf, charge)
	}
}

// apiOperator returns an operator's API token.
func apiOperator(t *testing.T, db *storetest.DB, store *storetest.Stores) string {
	t.Helper()
	ensureUser(t, db, "olga", dlq.RoleOperator)
	token, err := dlq.NewTokenSecret()
	must(t, err)
	_, err = store.Access.CreateToken(context.Background(), dlq.NewToken{UserName: "olga", Label: "on call",
		Hash: dlq.HashToken(token), Actor: dlq.Actor{Name: "e2e"}, Now: time.Now()})
	must(t, err)
	return token
}

// apiCall sends a request with token and decodes its JSON answer, failing
// the test on an answer of 400 or more.
func apiCall(t *testing.T, method, url, token, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	must(t, err)
	if res.StatusCode >= 400 {
		t.Fatalf("%s %s: %d %s", method, url, res.StatusCode, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, url, err, raw)
	}
	return out
}

func apiPost(t *testing.T, base, token, path, body string) map[string]any {
	t.Helper()
	return apiCall(t, "POST", base+path, token, body)
}

// waitOperation polls the operation until it is in state, and returns it.
func waitOperation(t *testing.T, base, token string, id int64, state string, d time.Duration) map[string]any {
	t.Helper()
	var op map[string]any
	waitUntil(t, d, fmt.Sprintf("operation %d to be %s", id, state), func() bool {
		op = apiCall(t, "GET", fmt.Sprintf("%s/api/v1/operations/%d", base, id), token, "")
		return op["state"] == state
	})
	return op
}
