package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web"
)

// apiConsole is a console whose workers have registered the tasks t.ok and
// t.other, so jobs of those tasks may be enqueued.
func apiConsole(t *testing.T, cfgs ...func(*web.Config)) console {
	t.Helper()
	c := newConsole(t, cfgs...)
	if err := c.store.Queue.RegisterTasks(context.Background(), []string{"t.ok", "t.other"}); err != nil {
		t.Fatal(err)
	}
	return c
}

type apiErr struct {
	Error struct {
		Code    string            `json:"code"`
		Message string            `json:"message"`
		Fields  map[string]string `json:"fields"`
	} `json:"error"`
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

func TestAPIEnqueueJob(t *testing.T) {
	t.Parallel()

	t.Run("CreatesAndReads", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t)
		rec := c.do(t, http.MethodPost, "/api/v1/jobs", `{"task":"t.ok","queue":"payments","args":[1,"a"],"kwargs":{"k":true},"max_attempts":3}`)
		if rec.Code != http.StatusCreated {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		job := decode[dlq.Job](t, rec.Body.String())
		if job.ID == 0 || job.Task != "t.ok" || job.Queue != "payments" || job.MaxAttempts != 3 || job.State != dlq.StateAvailable {
			t.Fatalf("job %+v", job)
		}
		if loc := rec.Header().Get("Location"); loc != fmt.Sprintf("/api/v1/jobs/%d", job.ID) {
			t.Errorf("Location %q", loc)
		}
		got := c.do(t, http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", job.ID), "")
		if got.Code != http.StatusOK {
			t.Fatalf("get: status %d", got.Code)
		}
		read := decode[dlq.Job](t, got.Body.String())
		if read.ID != job.ID || string(read.Args) != `[1,"a"]` || string(read.Kwargs) != `{"k":true}` {
			t.Errorf("read back %+v (args %s, kwargs %s)", read, read.Args, read.Kwargs)
		}
	})

	t.Run("SameIdempotencyKeyIs200WithTheFirstJob", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t)
		body := `{"task":"t.ok","idempotency_key":"order-42"}`
		first := c.do(t, http.MethodPost, "/api/v1/jobs", body)
		second := c.do(t, http.MethodPost, "/api/v1/jobs", body)
		if first.Code != http.StatusCreated || second.Code != http.StatusOK {
			t.Fatalf("statuses %d then %d, want 201 then 200", first.Code, second.Code)
		}
		if a, b := decode[dlq.Job](t, first.Body.String()).ID, decode[dlq.Job](t, second.Body.String()).ID; a != b {
			t.Errorf("two jobs %d and %d for one key", a, b)
		}
		if n := c.count(t, `SELECT count(*) FROM jobs`); n != 1 {
			t.Errorf("%d jobs, want 1", n)
		}
	})

	t.Run("UnknownAndBadIDs", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t)
		rec := c.do(t, http.MethodGet, "/api/v1/jobs/424242", "")
		if rec.Code != http.StatusNotFound || decode[apiErr](t, rec.Body.String()).Error.Code != "not_found" {
			t.Errorf("unknown id: %d %s", rec.Code, rec.Body)
		}
		rec = c.do(t, http.MethodGet, "/api/v1/jobs/abc", "")
		if rec.Code != http.StatusBadRequest {
			t.Errorf("bad id: %d %s", rec.Code, rec.Body)
		}
	})

	bad := []struct {
		name, body string
		field      string // the field the error names, or "" for a body-level error
		message    string // part of the message
	}{
		{"EmptyBody", ``, "", "empty"},
		{"Truncated", `{"task": "t.ok"`, "", "ends before"},
		{"SyntaxErrorSaysWhere", "{\n  \"task\": \"t.ok\",\n}", "", "line 3, column 1"},
		{"NotAnObject", `[{"task":"t.ok"}]`, "", "JSON object"},
		{"TrailingData", `{"task":"t.ok"} {"task":"t.ok"}`, "", "after the JSON object"},
		{"UnknownField", `{"task":"t.ok","max_atempts":3}`, "max_atempts", "unknown field"},
		{"FieldInAnotherCase", `{"task":"t.ok","Task":"t.nobody"}`, "Task", "case-sensitive"},
		{"OnlyFieldInAnotherCase", `{"TASK":"t.ok"}`, "TASK", `did you mean "task"`},
		{"RunAtYearsAhead", `{"task":"t.ok","run_at":"9999-12-31T00:00:00Z"}`, "run_at", "at most 365 days ahead"},
		{"DuplicateField", `{"task":"t.ok","task":"t.ok"}`, "task", "twice"},
		{"DuplicateKeyInTheArguments", `{"task":"t.ok","kwargs":{"a":1,"a":2}}`, "kwargs.a", "twice"},
		{"UnknownTask", `{"task":"t.nobody"}`, "task", "unknown task"},
		{"MissingTask", `{"queue":"default"}`, "task", "required"},
		{"ArgsNotArray", `{"task":"t.ok","args":{"a":1}}`, "args", "array"},
		{"KwargsNotObject", `{"task":"t.ok","kwargs":[1]}`, "kwargs", "object"},
		{"NegativeMaxAttempts", `{"task":"t.ok","max_attempts":-1}`, "max_attempts", "between 1 and"},
		{"ZeroMaxAttempts", `{"task":"t.ok","max_attempts":0}`, "max_attempts", "between 1 and"},
		{"MaxAttemptsAString", `{"task":"t.ok","max_attempts":"5"}`, "max_attempts", "whole number"},
		{"BadQueueName", `{"task":"t.ok","queue":"no spaces"}`, "queue", "letters"},
	}
	for _, tt := range bad {
		t.Run("400/"+tt.name, func(t *testing.T) {
			t.Parallel()
			c := apiConsole(t)
			rec := c.do(t, http.MethodPost, "/api/v1/jobs", tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			e := decode[apiErr](t, rec.Body.String()).Error
			text := e.Message
			if tt.field != "" {
				text = e.Fields[tt.field]
				if text == "" {
					t.Fatalf("no error for field %q: %+v", tt.field, e)
				}
			}
			if !strings.Contains(text, tt.message) {
				t.Errorf("error %q does not say %q", text, tt.message)
			}
			if n := c.count(t, `SELECT count(*) FROM jobs`); n != 0 {
				t.Errorf("a refused request inserted %d jobs", n)
			}
		})
	}

	t.Run("413WhenTheBodyIsTooLarge", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t, func(cfg *web.Config) { cfg.BodyLimit = "1K" })
		body := `{"task":"t.ok","args":["` + strings.Repeat("x", 4096) + `"]}`
		rec := c.do(t, http.MethodPost, "/api/v1/jobs", body)
		if rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413: %s", rec.Code, rec.Body)
		}
	})
}

func TestAPIEnqueueBatch(t *testing.T) {
	t.Parallel()

	t.Run("AllInOrder", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t)
		rec := c.do(t, http.MethodPost, "/api/v1/jobs/batch", `{"jobs":[{"task":"t.ok"},{"task":"t.other","queue":"q2"},{"task":"t.ok","args":[3]}]}`)
		if rec.Code != http.StatusCreated {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		ids := decode[struct{ IDs []int64 }](t, rec.Body.String()).IDs
		if len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]) {
			t.Fatalf("ids %v", ids)
		}
		if n := c.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND task = 't.other' AND queue = 'q2'`, ids[1]); n != 1 {
			t.Error("the second id is not the second job")
		}
	})

	t.Run("TenThousandInOneRequest", func(t *testing.T) {
		t.Parallel()
		c := apiConsole(t)
		rec := c.do(t, http.MethodPost, "/api/v1/jobs/batch", batchBody(dlq.MaxBatch, -1))
		if rec.Code != http.StatusCreated {
			t.Fatalf("status %d: %.300s", rec.Code, rec.Body)
		}
		if n := c.count(t, `SELECT count(*) FROM jobs`); n != dlq.MaxBatch {
			t.Errorf("%d jobs, want %d", n, dlq.MaxBatch)
		}
	})

	refused := []struct {
		name, body, field string
	}{
		{"OneBadJobRefusesAll", batchBody(50, 17), "jobs[17].max_attempts"},
		{"UnknownTaskRefusesAll", `{"jobs":[{"task":"t.ok"},{"task":"t.nobody"}]}`, "task"},
		{"OverTheLimit", batchBody(dlq.MaxBatch+1, -1), "jobs"},
		{"Empty", `{"jobs":[]}`, "jobs"},
		{"UnknownFieldInAJob", `{"jobs":[{"task":"t.ok","priority":1}]}`, "priority"},
	}
	for _, tt := range refused {
		t.Run("400/"+tt.name, func(t *testing.T) {
			t.Parallel()
			c := apiConsole(t)
			rec := c.do(t, http.MethodPost, "/api/v1/jobs/batch", tt.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %.300s", rec.Code, rec.Body)
			}
			if e := decode[apiErr](t, rec.Body.String()).Error; e.Fields[tt.field] == "" {
				t.Errorf("no error for %q: %+v", tt.field, e)
			}
			if n := c.count(t, `SELECT count(*) FROM jobs`); n != 0 {
				t.Errorf("a refused batch inserted %d jobs", n)
			}
		})
	}
}

// batchBody is a batch of n valid jobs, except job bad (when >= 0), which
// has a negative max_attempts.
func batchBody(n, bad int) string {
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i == bad {
			fmt.Fprintf(&b, `{"task":"t.ok","max_attempts":-%d}`, i)
			continue
		}
		fmt.Fprintf(&b, `{"task":"t.ok","args":[%d]}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}
