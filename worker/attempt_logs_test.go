package worker_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/worker"
)

func TestAttemptLogs(t *testing.T) {
	t.Parallel()

	t.Run("EachFailedAttemptKeepsItsOwnLinesOnTheLetter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			log := worker.Logger(ctx).With("invoice", 42)
			log.Debug("debug detail, not kept")
			log.Info("charging card", "try", job.Attempt)
			log.WithGroup("gateway").Warn("gateway slow", "ms", 900)
			if job.Attempt < 3 {
				return refused()
			}
			return errors.New("still refused")
		}, worker.TaskOptions{})
		b.start(t, b.config("w-logs"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3})
		b.waitJob(t, id, dlq.StateDead, 10*time.Second)

		letters := b.deadLetters(t, id)
		if len(letters) != 1 || len(letters[0].History) != 3 {
			t.Fatalf("want one letter with 3 attempts, have %+v", letters)
		}
		for i, a := range letters[0].History {
			lines := strings.Split(strings.TrimSuffix(a.Logs, "\n"), "\n")
			if len(lines) != 2 {
				t.Fatalf("attempt %d: want its 2 lines at Info and above, have %q", i+1, a.Logs)
			}
			want := regexp.MustCompile(`^time=\d\d:\d\d:\d\d\.\d{3} level=INFO msg="charging card" invoice=42 try=` + string(rune('1'+i)) + `$`)
			if !want.MatchString(lines[0]) {
				t.Errorf("attempt %d: first line %q, want %s", i+1, lines[0], want)
			}
			if !strings.Contains(lines[1], `level=WARN msg="gateway slow" invoice=42 gateway.ms=900`) {
				t.Errorf("attempt %d: second line %q", i+1, lines[1])
			}
		}
		// Nothing is lost from the worker's own log, Debug included.
		for _, s := range []string{"debug detail, not kept", "charging card", "gateway slow"} {
			if !strings.Contains(b.logs.String(), s) {
				t.Errorf("worker log lacks %q", s)
			}
		}
	})

	t.Run("SucceededAttemptKeepsNothingButItsFailuresDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			worker.Logger(ctx).Info("attempt ran", "n", job.Attempt)
			if job.Attempt == 1 {
				return refused()
			}
			return nil
		}, worker.TaskOptions{})
		b.start(t, b.config("w-logs-ok"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3})
		j := b.waitJob(t, id, dlq.StateSucceeded, 10*time.Second)
		if len(j.Errors) != 1 || !strings.Contains(j.Errors[0].Logs, `msg="attempt ran" n=1`) {
			t.Fatalf("want the failed attempt's line in the job's history, have %+v", j.Errors)
		}
		waitFor(t, 5*time.Second, "the success's line in the worker log", func() bool {
			return strings.Contains(b.logs.String(), "attempt ran") && strings.Contains(b.logs.String(), "n=2")
		})
	})

	t.Run("LinesPastTheBoundAreCutAndCounted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			for i := range 2000 {
				worker.Logger(ctx).Info("row processed", "row", i, "pad", strings.Repeat("x", 40))
			}
			return worker.Permanent(errors.New("bad batch"))
		}, worker.TaskOptions{})
		b.start(t, b.config("w-logs-cut"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 1})
		j := b.waitJob(t, id, dlq.StateDead, 10*time.Second)
		logs := j.Errors[0].Logs
		if len(logs) > 64<<10+100 || len(logs) < 60<<10 {
			t.Errorf("kept %d bytes, want about 64 KiB", len(logs))
		}
		if !strings.HasPrefix(logs, "time=") || !strings.Contains(logs, "row=0 ") {
			t.Errorf("the first lines are not kept: %.200q", logs)
		}
		note := regexp.MustCompile(`\n… (\d+) more lines, (\d+\.\d) KiB, cut\n$`).FindStringSubmatch(logs)
		if note == nil {
			t.Fatalf("no cut note at the end: %q", logs[len(logs)-200:])
		}
		kept := strings.Count(logs, "row processed")
		if cut, _ := strconv.Atoi(note[1]); kept+cut != 2000 {
			t.Errorf("kept %d lines and cut %s, want 2000 in all", kept, note[1])
		}
	})

	t.Run("LinesFromAGoroutineLeftBehindReachNoAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		release, lateDone := make(chan struct{}), make(chan struct{})
		b.reg.Register("test.task", func(ctx context.Context, job *worker.Job) error {
			log := worker.Logger(ctx)
			if job.Attempt == 1 {
				log.Info("first attempt")
				go func() {
					defer close(lateDone)
					<-release
					log.Info("late line from attempt one")
					worker.Logger(ctx).Info("late line through the ended context")
				}()
				return refused()
			}
			close(release)
			<-lateDone
			log.Info("second attempt")
			return worker.Permanent(errors.New("give up"))
		}, worker.TaskOptions{})
		b.start(t, b.config("w-logs-late"))
		id := b.enqueue(t, dlq.EnqueueParams{Task: "test.task", MaxAttempts: 3})
		j := b.waitJob(t, id, dlq.StateDead, 10*time.Second)
		if len(j.Errors) != 2 {
			t.Fatalf("want 2 attempts, have %+v", j.Errors)
		}
		for i, a := range j.Errors {
			if strings.Contains(a.Logs, "late line") {
				t.Errorf("attempt %d kept a line logged after attempt 1 ended: %q", i+1, a.Logs)
			}
		}
		if !strings.Contains(j.Errors[0].Logs, "first attempt") || !strings.Contains(j.Errors[1].Logs, "second attempt") {
			t.Errorf("attempts lost their own lines: %q, %q", j.Errors[0].Logs, j.Errors[1].Logs)
		}
		if !strings.Contains(b.logs.String(), "late line from attempt one") {
			t.Error("the late line did not reach the worker's own log")
		}
	})
}
