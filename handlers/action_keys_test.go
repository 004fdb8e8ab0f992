package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A one-time key is bound to the request it was first used for: its
// action, its target and its body. Sent again with the same request it
// returns the first answer; with another request it is refused (422, as
// Stripe's API does) and nothing happens.
func TestActionKeyIsBoundToItsRequest(t *testing.T) {
	t.Parallel()

	// refused checks a 422 that names the reuse and changed nothing.
	refused := func(t *testing.T, a actions, rec int, body map[string]any, before int) {
		t.Helper()
		if rec != http.StatusUnprocessableEntity {
			t.Fatalf("status %d %v; want 422", rec, body)
		}
		e, _ := body["error"].(map[string]any)
		if e["code"] != "idempotency_key_reused" || !strings.Contains(fmt.Sprint(e["message"]), "already used for a different request") {
			t.Fatalf("error %v", body)
		}
		if n := a.actionEntries(t); n != before {
			t.Fatalf("the refused request wrote %d audit entries", n-before)
		}
	}

	t.Run("APIDiscardOfAnotherLetter", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 2, "billing.charge")
		key := []string{"Idempotency-Key", "K-discard"}
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[0]), `{"reason": "dup"}`, key...)
		if rec.Code != http.StatusOK {
			t.Fatalf("first discard: %d %v", rec.Code, body)
		}
		first := body["audit_event_id"]
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[1]), `{"reason": "dup"}`, key...)
		refused(t, a, rec.Code, body, 1)
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, ids[1]); n != 1 {
			t.Fatal("the second letter is not pending any more")
		}
		// Another body for the same letter is another request too.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[0]), `{"reason": "other"}`, key...)
		refused(t, a, rec.Code, body, 1)
		// The same request again is the first answer.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, fmt.Sprintf("/api/v1/dead-letters/%d/discard", ids[0]), `{"reason":"dup"}`, key...)
		if rec.Code != http.StatusOK || body["audit_event_id"] != first {
			t.Fatalf("retry: %d %v; want 200 with entry %v", rec.Code, body, first)
		}
	})

	t.Run("APIReplayAndRestore", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 2, "billing.charge")
		key := []string{"Idempotency-Key", "K-replay"}
		path := func(id int64, action string) string { return fmt.Sprintf("/api/v1/dead-letters/%d/%s", id, action) }
		if rec, body := a.api(t, a.olgaAPI, http.MethodPost, path(ids[0], "replay"), `{"args": [1, {"a": 1, "b": 2}]}`, key...); rec.Code != http.StatusOK {
			t.Fatalf("replay: %d %v", rec.Code, body)
		}
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, path(ids[1], "replay"), `{"args": [1, {"a": 1, "b": 2}]}`, key...)
		refused(t, a, rec.Code, body, 1)
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, path(ids[0], "replay"), `{"args": [2]}`, key...)
		refused(t, a, rec.Code, body, 1)
		// The same edit, spaced and ordered otherwise, is the same request.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, path(ids[0], "replay"), `{"args": [1,{"b":2,"a":1}]}`, key...)
		if rec.Code != http.StatusOK || body["repeated"] != true {
			t.Fatalf("retry of the same edit: %d %v", rec.Code, body)
		}
		// A key used for a replay cannot restore.
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, path(ids[0], "restore"), ``, key...)
		refused(t, a, rec.Code, body, 1)
		if n := a.count(t, `SELECT count(*) FROM jobs`); n != 1 {
			t.Fatalf("%d jobs, want 1", n)
		}
	})

	t.Run("APIBulk", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 3, "billing.charge")
		key := []string{"Idempotency-Key", "K-bulk"}
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/discard",
			fmt.Sprintf(`{"ids": [%d, %d], "reason": "dup"}`, ids[0], ids[1]), key...)
		if rec.Code != http.StatusOK {
			t.Fatalf("bulk: %d %v", rec.Code, body)
		}
		op := body["operation_id"]
		before := a.actionEntries(t)
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/discard",
			fmt.Sprintf(`{"ids": [%d], "reason": "dup"}`, ids[2]), key...)
		refused(t, a, rec.Code, body, before)
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, ids[2]); n != 1 {
			t.Fatal("the letter of the refused bulk request is not pending any more")
		}
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay",
			fmt.Sprintf(`{"ids": [%d, %d], "reason": "dup"}`, ids[0], ids[1]), key...)
		refused(t, a, rec.Code, body, before)
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/discard",
			fmt.Sprintf(`{"ids": [%d, %d], "reason": "dup"}`, ids[1], ids[0]), key...)
		if rec.Code != http.StatusOK || body["operation_id"] != op {
			t.Fatalf("retry: %d %v; want operation %v", rec.Code, body, op)
		}
		if n := a.count(t, `SELECT count(*) FROM operations`); n != 1 {
			t.Fatalf("%d operations, want 1", n)
		}
	})

	t.Run("PageFormKeySentForAnotherLetter", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 2, "billing.charge")
		_, doc := a.page(t, a.olga, fmt.Sprintf("/dead-letters/%d", ids[0]))
		form := doc.Find(`[data-testid="discard-form"]`)
		v := formValues(form, url.Values{"reason": {"dup"}})
		if rec := a.post(t, a.olga, form.AttrOr("action", ""), v); rec.Code != http.StatusSeeOther {
			t.Fatalf("discard: %d", rec.Code)
		}
		rec := a.post(t, a.olga, fmt.Sprintf("/dead-letters/%d/discard", ids[1]), v)
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "already used for a different request") {
			t.Fatalf("the same form key for another letter: %d %.400s", rec.Code, rec.Body.String())
		}
		if n := a.count(t, `SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'pending'`, ids[1]); n != 1 {
			t.Fatal("the second letter is not pending any more")
		}
	})

	t.Run("BulkConfirmFormSentForAnotherSelection", func(t *testing.T) {
		t.Parallel()
		a := newActions(t)
		ids := a.letters(t, 3, "billing.charge")
		_, list := a.page(t, a.olga, "/dead-letters")
		rec := a.submit(t, a.olga, list, `[data-testid="bulk-form"]`,
			url.Values{"action": {"discard"}, "id": {fmt.Sprint(ids[0]), fmt.Sprint(ids[1])}})
		if rec.Code != http.StatusOK {
			t.Fatalf("confirmation: %d", rec.Code)
		}
		confirm := parseHTML(t, rec)
		form := confirm.Find(`[data-testid="confirm-form"]`)
		v := formValues(form, url.Values{"reason": {"dup"}})
		if rec := a.post(t, a.olga, form.AttrOr("action", ""), v); rec.Code != http.StatusSeeOther {
			t.Fatalf("confirm: %d %.300s", rec.Code, rec.Body.String())
		}
		v["id"] = []string{fmt.Sprint(ids[2])}
		rec = a.post(t, a.olga, form.AttrOr("action", ""), v)
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "already used for a different request") {
			t.Fatalf("the same confirmation key for another selection: %d %.400s", rec.Code, rec.Body.String())
		}
		if n := a.count(t, `SELECT count(*) FROM operations`); n != 1 {
			t.Fatalf("%d operations, want 1", n)
		}
	})
}

// Cancelling or releasing an operation over the API honours its
// Idempotency-Key as every other action does: a client that retries after
// a timeout gets the first answer, not a 409 "already cancelled", and the
// key sent to another operation, or to the other action, is refused.
func TestOperationChangeKeyIsBoundToItsRequest(t *testing.T) {
	t.Parallel()
	a := newActions(t)
	canary := func() int64 {
		ids := a.letters(t, 3, "reports.build")
		rec, body := a.api(t, a.olgaAPI, http.MethodPost, "/api/v1/dead-letters/replay",
			fmt.Sprintf(`{"ids": [%d, %d, %d], "canary": 1}`, ids[0], ids[1], ids[2]))
		if rec.Code != http.StatusAccepted || body["state"] != "canary" {
			t.Fatalf("canary: %d %v", rec.Code, body)
		}
		return num(body["operation_id"])
	}
	first, second := canary(), canary()
	key := []string{"Idempotency-Key", "K-cancel"}
	path := func(id int64, action string) string { return fmt.Sprintf("/api/v1/operations/%d/%s", id, action) }
	rec, body := a.api(t, a.olgaAPI, http.MethodPost, path(first, "cancel"), "", key...)
	if rec.Code != http.StatusOK || body["state"] != "cancelled" {
		t.Fatalf("cancel: %d %v", rec.Code, body)
	}
	rec, body = a.api(t, a.olgaAPI, http.MethodPost, path(first, "cancel"), "{}", key...)
	if rec.Code != http.StatusOK || body["state"] != "cancelled" || num(body["operation_id"]) != first {
		t.Fatalf("retried cancel: %d %v; want the first answer", rec.Code, body)
	}
	for _, p := range []string{path(second, "cancel"), path(first, "release"), path(second, "release")} {
		rec, body = a.api(t, a.olgaAPI, http.MethodPost, p, "", key...)
		if e, _ := body["error"].(map[string]any); rec.Code != http.StatusUnprocessableEntity || e["code"] != "idempotency_key_reused" {
			t.Fatalf("%s with the first cancel's key: %d %v; want 422 idempotency_key_reused", p, rec.Code, body)
		}
	}
	if n := a.count(t, `SELECT count(*) FROM operations WHERE state = 'canary'`); n != 1 {
		t.Fatalf("%d operations wait at their canary, want 1 (the second)", n)
	}
	key = []string{"Idempotency-Key", "K-release"}
	for range 2 {
		if rec, body = a.api(t, a.olgaAPI, http.MethodPost, path(second, "release"), "", key...); rec.Code != http.StatusAccepted && rec.Code != http.StatusOK {
			t.Fatalf("release (or its retry): %d %v", rec.Code, body)
		}
	}
}
