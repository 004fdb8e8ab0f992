package worker_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
)

// child is a worker running in a re-executed copy of the test binary.
type child struct {
	id   string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

type childOpts struct {
	lease, grace time.Duration
	concurrency  int
	// schedule, when set, registers scheduleName to enqueue test.sleep
	// this often.
	schedule time.Duration
}

func startChild(t *testing.T, b *bundle, id string, o childOpts) *child {
	t.Helper()
	c := &child{id: id, out: &syncBuffer{}, done: make(chan error, 1)}
	c.cmd = exec.Command(os.Args[0])
	c.cmd.Env = append(os.Environ(), childEnv+"=1",
		"REDRIVE_CHILD_DSN="+b.db.DSN, "REDRIVE_CHILD_ID="+id,
		fmt.Sprintf("REDRIVE_CHILD_LEASE_MS=%d", o.lease.Milliseconds()),
		fmt.Sprintf("REDRIVE_CHILD_GRACE_MS=%d", o.grace.Milliseconds()),
		fmt.Sprintf("REDRIVE_CHILD_CONCURRENCY=%d", o.concurrency),
		fmt.Sprintf("REDRIVE_CHILD_SCHEDULE_MS=%d", o.schedule.Milliseconds()))
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	// Should the test binary die, the kernel takes the child with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		c.wait(t, 10*time.Second)
		if t.Failed() {
			t.Logf("child %s output:\n%s", id, c.out.String())
		}
	})
	return c
}

// wait returns the child's exit error once it has exited.
func (c *child) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		return err
	case <-time.After(timeout):
		t.Fatalf("child %s did not exit within %s", c.id, timeout)
		return nil
	}
}

func (c *child) exited() bool {
	select {
	case err := <-c.done:
		c.done <- err
		return true
	default:
		return false
	}
}

func TestProcess(t *testing.T) {
	t.Parallel()

	t.Run("SIGKILLMidJobRedeliversAfterTheLeaseAndLosesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The four oldest jobs hang on their first attempt, so the child
		// (concurrency 4) is mid-job on all of them when it dies; six more
		// wait in the queue behind them.
		ids := make([]int64, 10)
		for i := range ids {
			p := dlq.EnqueueParams{Task: "test.hang_first_attempt", IdempotencyKey: fmt.Sprintf("order-%d", i)}
			if i >= 4 {
				p.Task, p.Kwargs = "test.sleep", kwargs(map[string]int{"ms": 5})
			}
			ids[i] = b.enqueue(t, p)
		}
		c := startChild(t, b, "child-doomed", childOpts{lease: time.Second, grace: time.Second, concurrency: 4})
		waitFor(t, 10*time.Second, "the child to hold 4 jobs", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE state = 'running' AND lease_owner = 'child-doomed'`) == 4
		})
		if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		c.wait(t, 5*time.Second)
		var expires time.Time
		if err := b.db.Get(&expires, `SELECT max(lease_expires_at) FROM jobs WHERE lease_owner = 'child-doomed'`); err != nil {
			t.Fatal(err)
		}

		registerTestTasks(b.reg)
		b.start(t, b.config("w-survivor"))
		for _, id := range ids {
			b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
		}
		var rescued int
		for _, id := range ids {
			j := b.job(t, id)
			if len(j.Errors) == 0 {
				continue // never claimed by the child
			}
			rescued++
			first := j.Errors[0]
			if j.Attempt != 2 || first.Outcome != dlq.OutcomeLeaseExpired || first.Worker != "child-doomed" ||
				first.Class != dlq.LeaseExpiredClass || first.Version != "child-test" {
				t.Errorf("job %d: attempt %d, history %+v", id, j.Attempt, j.Errors)
			}
			// Redelivered after the lease, not before: the rescuer cannot
			// tell a dead worker from a slow one any sooner.
			if j.AttemptedAt == nil || j.AttemptedAt.Before(expires) {
				t.Errorf("job %d claimed again at %v, before its lease expired at %s", id, j.AttemptedAt, expires)
			}
		}
		if rescued != 4 {
			t.Fatalf("%d jobs redelivered, want the 4 the child held", rescued)
		}
		if n := b.count(t, `SELECT count(*) FROM dead_letters`); n != 0 {
			t.Fatalf("%d dead letters", n)
		}
		// A killed worker cannot unregister: its row stays, with a stale heartbeat.
		if n := b.count(t, `SELECT count(*) FROM workers WHERE id = 'child-doomed'`); n != 1 {
			t.Fatalf("killed worker's row: %d", n)
		}
	})

	t.Run("SIGTERMFinishesShortJobsAndHandsTheLongOneBackAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var short []int64
		for range 3 {
			short = append(short, b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 400})}))
		}
		long := b.enqueue(t, dlq.EnqueueParams{Task: "test.sleep", Kwargs: kwargs(map[string]int{"ms": 60_000})})
		const grace, lease = time.Second, 30 * time.Second
		c := startChild(t, b, "child-term", childOpts{lease: lease, grace: grace, concurrency: 4})
		waitFor(t, 10*time.Second, "the child to run all 4 jobs", func() bool {
			return b.count(t, `SELECT count(*) FROM jobs WHERE state = 'running'`) == 4
		})
		// Read the clock before signalling: the child starts its grace on
		// receipt, which may come before Signal returns here.
		termed := time.Now()
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := c.wait(t, 10*time.Second); err != nil {
			t.Fatalf("child exited with %v", err)
		}
		took := time.Since(termed)
		// The slack covers process exit on a loaded machine; what matters is
		// that it is far below the 30s lease.
		if took < grace || took > grace+3*time.Second {
			t.Fatalf("child exited %s after SIGTERM, want about the %s grace", took, grace)
		}
		for _, id := range short {
			if j := b.job(t, id); j.State != dlq.StateSucceeded || j.Attempt != 1 {
				t.Errorf("short job %d: %s attempt %d, want succeeded on its only attempt", id, j.State, j.Attempt)
			}
		}
		j := b.job(t, long)
		if j.State != dlq.StateAvailable || j.LeaseOwner != nil || j.LeaseExpiresAt != nil || j.Attempt != 0 {
			t.Fatalf("long job not handed back: %+v", j)
		}
		if last, _ := j.Errors.Last(); last.Outcome != dlq.OutcomeInterrupted || last.Worker != "child-term" {
			t.Fatalf("hand-back not in history: %+v", j.Errors)
		}
		if n := b.count(t, `SELECT count(*) FROM workers`); n != 0 {
			t.Fatalf("stopped child left its worker row")
		}
		if took >= lease {
			t.Fatal("unreachable: handed back only after the lease")
		}
	})

	t.Run("JobThatKeepsKillingItsWorkerDeadLettersAsLeaseExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.kill_worker", MaxAttempts: 3,
			Kwargs: kwargs(map[string]string{"report": "q3-ledger.csv"})})
		var kills int
		for i := 0; b.job(t, id).State != dlq.StateDead; i++ {
			if i == 6 {
				t.Fatalf("job not dead after %d workers: %+v", i, b.job(t, id))
			}
			c := startChild(t, b, fmt.Sprintf("child-%d", i), childOpts{lease: 500 * time.Millisecond, grace: time.Second, concurrency: 1})
			waitFor(t, 10*time.Second, "the child to die or the job to be dead", func() bool {
				return c.exited() || b.job(t, id).State == dlq.StateDead
			})
			if c.exited() {
				var exit *exec.ExitError
				if err := c.wait(t, time.Second); errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL {
					kills++
				}
				continue
			}
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			c.wait(t, 5*time.Second)
		}
		if kills != 3 {
			t.Fatalf("the job killed %d workers, want max_attempts=3", kills)
		}
		dls := b.deadLetters(t, id)
		if len(dls) != 1 {
			t.Fatalf("%d dead letters", len(dls))
		}
		dl := dls[0]
		if dl.Reason != dlq.ReasonLeaseExpired || dl.Attempts != 3 || dl.ErrorClass != dlq.LeaseExpiredClass || len(dl.History) != 3 {
			t.Fatalf("letter: reason %s attempts %d class %s history %d", dl.Reason, dl.Attempts, dl.ErrorClass, len(dl.History))
		}
		for i, h := range dl.History {
			if h.Worker != fmt.Sprintf("child-%d", i) || h.Version != "child-test" || !strings.Contains(h.Message, "lease expired") {
				t.Errorf("history[%d] = %+v", i, h)
			}
		}
		if dl.WorkerVersion != "child-test" {
			t.Errorf("worker_version %q", dl.WorkerVersion)
		}
	})
}
