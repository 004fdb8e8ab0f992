package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

// The action API with a bearer token, as a script would call it.

func TestActionAPI(t *testing.T) {
	t.Parallel()

	t.Run("ReplayThenConflictWithTheJob", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		path := fmt.Sprintf("/api/v1/dead-letters/%d/replay", id)
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, path, "")
		if rec.Code != http.StatusOK || num(body["replay_job_id"]) == 0 {
			t.Fatalf("replay: %d %v", rec.Code, body)
		}
		job := num(body["replay_job_id"])
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, path, `{"reason": "again"}`)
		if rec.Code != http.StatusConflict || num(body["replay_job_id"]) != job {
			t.Fatalf("second replay: %d %v; want 409 naming job %d", rec.Code, body, job)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 1 {
			t.Fatalf("%d jobs", n)
		}
	})

	t.Run("SameIdempotencyKeyReplaysOnce", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		path := fmt.Sprintf("/api/v1/dead-letters/%d/replay", id)
		rec1, b1 := a.api(t, a.olgaAPI, http.MethodPost, path, "", "Idempotency-Key", "deploy-42-retry")
		rec2, b2 := a.api(t, a.olgaAPI, http.MethodPost, path, "", "Idempotency-Key", "deploy-42-retry")
		if rec1.Code != http.StatusOK || rec2.Code != http.StatusOK {
			t.Fatalf("statuses %d, %d; want 200 twice", rec1.Code, rec2.Code)
		}
		if b1["replay_job_id"] != b2["replay_job_id"] || b1["audit_event_id"] != b2["audit_event_id"] || b2["repeated"] != true {
			t.Fatalf("answers differ: %v / %v", b1, b2)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.actionEntries(t); n != 2 {
			t.Fatalf("want one job and one audit entry, have %d in all", n)
		}
	})

	t.Run("EditsAreValidatedBeforeAnythingHappens", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		path := fmt.Sprintf("/api/v1/dead-letters/%d/replay", id)
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, path, `{"args": {"not": "an array"}}`)
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("wrong shape: %d %v", rec.Code, body)
		}
		fields := body["error"].(map[string]any)["fields"].(map[string]any)
		if !strings.Contains(fmt.Sprint(fields["args"]), "array") {
			t.Fatalf("fields %v", fields)
		}
		rec, _ = a.api(t, a.olgaAPI, http.MethodPost, path, `{"kwargs": "{\"a\": 1"}`)
		if rec.Code != http.StatusUnprocessableEntity {
			t.Fatalf("kwargs as a string of broken JSON: %d", rec.Code)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.actionEntries(t); n != 0 {
			t.Fatal("an invalid edit changed something")
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, path, `{"args": [2, {"order": "B"}], "kwargs": null}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("valid edit: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM jobs WHERE args = '[2, {"order": "B"}]' AND kwargs = '{"region": "eu"}'`); n != 1 {
			t.Fatal("the job should carry the edited args and the letter's kwargs")
		}
	})

	t.Run("DiscardRestoreAndRefusals", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		base := fmt.Sprintf("/api/v1/dead-letters/%d", id)
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, base+"/discard", `{}`)
		if rec.Code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "reason") {
			t.Fatalf("discard without reason: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`) + a.actionEntries(t); n != 1 {
			t.Fatal("a refused discard changed something")
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, base+"/discard", `{"reason": "test data"}`)
		if rec.Code != http.StatusOK || body["status"] != "discarded" {
			t.Fatalf("discard: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, base+"/replay", ``)
		if rec.Code != http.StatusConflict || !strings.Contains(fmt.Sprint(body), "restore it") {
			t.Fatalf("replay of a discarded letter: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, base+"/restore", ``)
		if rec.Code != http.StatusOK || body["status"] != "pending" {
			t.Fatalf("restore: %d %v", rec.Code, body)
		}
		rec, _ = a.api(t, a.olgaAPI, http.MethodPost, base+"/restore", ``)
		if rec.Code != http.StatusConflict {
			t.Fatalf("restore of a pending letter: %d", rec.Code)
		}
		if n := a.actionEntries(t); n != 2 {
			t.Fatalf("%d audit entries, want 2", n)
		}
	})

	t.Run("StatusCodes", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		id := a.letters(t, 1, "billing.charge")[0]
		cases := []struct {
			name, path, body string
			want             int
			says             string
		}{
			{"NotFound", "/api/v1/dead-letters/999999/replay", "", http.StatusNotFound, ""},
			{"BadID", "/api/v1/dead-letters/abc/replay", "", http.StatusBadRequest, "positive whole number"},
			{"UnknownField", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), `{"arg": [1]}`, http.StatusBadRequest, "unknown field"},
			{"Malformed", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), "{\n  \"args\": [1,,]\n}", http.StatusBadRequest, "line 2"},
			{"WrongType", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason": 5}`, http.StatusBadRequest, "string"},
			{"Trailing", fmt.Sprintf("/api/v1/dead-letters/%d/discard", id), `{"reason": "x"} {}`, http.StatusBadRequest, "after the JSON"},
			{"BulkNeitherIdsNorFilter", "/api/v1/dead-letters/replay", `{}`, http.StatusBadRequest, "select"},
			{"BulkBoth", "/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d], "filter": {}}`, id), http.StatusBadRequest, "not both"},
			{"BulkBadFilter", "/api/v1/dead-letters/replay", `{"filter": {"since": "yesterday"}}`, http.StatusBadRequest, "filter.since"},
			{"BulkUnknownFilterField", "/api/v1/dead-letters/replay", `{"filter": {"status": "all"}}`, http.StatusBadRequest, "unknown field"},
			{"BulkWaitTooLong", "/api/v1/dead-letters/replay", fmt.Sprintf(`{"ids": [%d], "wait_seconds": 600}`, id), http.StatusBadRequest, "wait_seconds"},
			{"BulkDiscardNoReason", "/api/v1/dead-letters/discard", fmt.Sprintf(`{"ids": [%d]}`, id), http.StatusBadRequest, "reason"},
			{"OperationNotFound", "/api/v1/operations/999/cancel", "", http.StatusNotFound, ""},
		}
		for _, c := range cases {
			rec, body := a.api(t, a.olgaAPI, http.MethodPost, c.path, c.body)
			if rec.Code != c.want || !strings.Contains(strings.ToLower(fmt.Sprint(body)), strings.ToLower(c.says)) {
				t.Errorf("%s: %d %v; want %d saying %q", c.name, rec.Code, body, c.want, c.says)
			}
		}
		if n := a.count(t, `SELECT count(*) FROM jobs`) + a.count(t, `SELECT count(*) FROM operations`) + a.actionEntries(t); n != 0 {
			t.Fatal("a refused request changed something")
		}
	})

	t.Run("BulkByFilterWaitsAndAnswersTheCounts", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		a.letters(t, 7, "reports.build")
		a.letters(t, 2, "email.send")
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay", `{"filter": {"task": "reports.build"}, "dry_run": true}`)
		if rec.Code != http.StatusOK || body["dry_run"] != true || num(body["matched"]) != 7 || body["operation_id"] != nil {
			t.Fatalf("dry run: %d %v", rec.Code, body)
		}
		if n := a.count(t, `SELECT count(*) FROM operations`) + a.count(t, `SELECT count(*) FROM jobs`); n != 0 {
			t.Fatal("a dry run changed something")
		}
		// Every letter handed to the queue within the wait, none run: 202, settling.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay", `{"filter": {"task": "reports.build"}, "reason": "fixed", "wait_seconds": 2}`)
		if rec.Code != http.StatusAccepted || body["state"] != "settling" || num(body["matched"]) != 7 || num(body["replayed"]) != 7 || num(body["skipped"]) != 0 {
			t.Fatalf("bulk replay: %d %v", rec.Code, body)
		}
		opID := num(body["operation_id"])
		rec, body = a.api(t, a.olgaAPI, http.MethodGet, fmt.Sprintf("/api/v1/operations/%d", opID), "")
		if r, _ := body["replays"].(map[string]any); rec.Code != http.StatusAccepted || num(r["waiting"]) != 7 || num(r["succeeded"]) != 0 {
			t.Fatalf("get settling operation: %d %v", rec.Code, body)
		}
		a.succeedReplays(t)
		a.waitOperation(t, opID, dlq.OpDone)
		rec, body = a.api(t, a.olgaAPI, http.MethodGet, fmt.Sprintf("/api/v1/operations/%d", opID), "")
		if r, _ := body["replays"].(map[string]any); rec.Code != http.StatusOK || body["state"] != "done" || num(r["succeeded"]) != 7 || num(r["waiting"]) != 0 {
			t.Fatalf("get operation: %d %v", rec.Code, body)
		}
		rec, _ = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/operations/%d/cancel", opID), "")
		if rec.Code != http.StatusConflict {
			t.Fatalf("cancel of a finished operation: %d", rec.Code)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/discard", `{"filter": {"task": "email.send"}, "reason": "spam"}`)
		if rec.Code != http.StatusOK || num(body["discarded"]) != 2 {
			t.Fatalf("bulk discard: %d %v", rec.Code, body)
		}
	})

	t.Run("BulkWithoutWaitingIs202", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 3, "billing.charge")
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay",
			fmt.Sprintf(`{"ids": [%d, %d, %d], "wait_seconds": 0}`, ids[0], ids[1], ids[2]))
		if rec.Code != http.StatusAccepted || body["state"] != "running" {
			t.Fatalf("%d %v; want 202 running", rec.Code, body)
		}
		opID := num(body["operation_id"])
		a.waitOperation(t, opID, dlq.OpSettling)
		// A canary stops at its canary: 202 with the canary's jobs.
		more := a.letters(t, 3, "reports.build")
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay",
			fmt.Sprintf(`{"ids": [%d, %d, %d], "canary": 1}`, more[0], more[1], more[2]))
		if rec.Code != http.StatusAccepted || body["state"] != "canary" || num(body["replayed"]) != 1 {
			t.Fatalf("canary: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodGet, fmt.Sprintf("/api/v1/operations/%d", num(body["operation_id"])), "")
		if jobs, _ := body["canary_jobs"].([]any); rec.Code != http.StatusAccepted || len(jobs) != 1 {
			t.Fatalf("get canary operation: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/operations/%d/release", num(body["operation_id"])), "")
		if rec.Code != http.StatusAccepted || body["state"] != "running" {
			t.Fatalf("release: %d %v", rec.Code, body)
		}
	})

	t.Run("AuditTrail", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 3, "billing.charge")
		a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/replay", ids[0]), "")
		a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[1]), `{"reason": "dup"}`)
		rec, body := a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit?actor=olga&limit=1", "")
		items, _ := body["items"].([]any)
		if rec.Code != http.StatusOK || len(items) != 1 || body["next_cursor"] == nil {
			t.Fatalf("audit page 1: %d %v", rec.Code, body)
		}
		if e := items[0].(map[string]any); e["action"] != "discard" || e["reason"] != "dup" || num(e["dead_letter_id"]) != ids[1] {
			t.Fatalf("newest entry %v", e)
		}
		rec, body = a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit?actor=olga&limit=1&cursor="+fmt.Sprint(body["next_cursor"]), "")
		items, _ = body["items"].([]any)
		if rec.Code != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["action"] != "replay" { // older: her sign-in
			t.Fatalf("audit page 2: %d %v", rec.Code, body)
		}
		rec, body = a.api(t, a.vicAPI, http.MethodGet, fmt.Sprintf("/api/v1/audit?dead_letter_id=%d", ids[0]), "")
		if items, _ = body["items"].([]any); rec.Code != http.StatusOK || len(items) != 1 {
			t.Fatalf("by letter: %d %v", rec.Code, body)
		}
		if rec, _ = a.api(t, a.vicAPI, http.MethodGet, "/api/v1/audit?action=nonsense", ""); rec.Code != http.StatusBadRequest {
			t.Fatalf("bad filter: %d", rec.Code)
		}
	})
}
