package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web/webtest"
)

// TestMaskedArguments: sensitive values never reach a page, the API or an
// export; an operator's reveal shows them and is audited; a viewer's is
// refused; an edit-and-replay that sends the placeholders back replays the
// stored values.
func TestMaskedArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.store.Queue.RegisterTasks(ctx, []string{"billing.charge"}); err != nil {
		t.Fatal(err)
	}
	const card, pw = "4111111111111111", "hunter2-hunter2"
	id := storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "billing.charge",
		Args:   `[{"customer":"c-9","Password":"` + pw + `"}]`,
		Kwargs: `{"payment":{"card_number":"` + card + `","amount":12},"items":[{"api_token":"tok-xyz"}]}`})
	viewer := e.as(t, "vic", dlq.RoleViewer)
	op := e.as(t, "olga", dlq.RoleOperator)
	secrets := []string{card, pw, "tok-xyz"}
	for _, path := range []string{"/dead-letters?status=all", fmt.Sprintf("/dead-letters/%d", id),
		"/dead-letters/export.csv", "/dead-letters/export.json", "/api/v1/dead-letters", fmt.Sprintf("/api/v1/dead-letters/%d", id)} {
		for who, s := range map[string]*webtest.Session{"viewer": viewer, "operator": op} {
			rec := s.Do(e.h, httptest.NewRequest("GET", path, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("%s as %s: %d", path, who, rec.Code)
			}
			for _, secret := range secrets {
				if strings.Contains(rec.Body.String(), secret) {
					t.Errorf("%s shows %s the secret %q", path, who, secret)
				}
			}
			if strings.HasPrefix(path, "/api/") && !strings.Contains(rec.Body.String(), `"card_number":"•••"`) {
				t.Errorf("%s: the masked key should be there, hidden", path)
			}
		}
	}
	detail := op.Do(e.h, httptest.NewRequest("GET", fmt.Sprintf("/dead-letters/%d", id), nil)).Body.String()
	if !strings.Contains(detail, `data-testid="reveal-args"`) || !strings.Contains(detail, "c-9") {
		t.Error("an operator's page should offer the reveal and show what is not sensitive")
	}
	if strings.Contains(viewer.Do(e.h, httptest.NewRequest("GET", fmt.Sprintf("/dead-letters/%d", id), nil)).Body.String(), `data-testid="reveal-args"`) {
		t.Error("a viewer is offered the reveal")
	}

	reveal := fmt.Sprintf("/dead-letters/%d/reveal", id)
	if rec := viewer.Do(e.h, request("POST", reveal, "")); rec.Code != http.StatusForbidden {
		t.Errorf("viewer reveal: %d, want 403", rec.Code)
	}
	if n := e.count(t, `SELECT count(*) FROM audit_events WHERE action = 'reveal_args'`); n != 0 {
		t.Fatalf("a refused reveal was audited (%d)", n)
	}
	rec := op.Do(e.h, request("POST", reveal, ""))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), card) || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("operator reveal: %d, card shown %v, cache %q", rec.Code, strings.Contains(rec.Body.String(), card), rec.Header().Get("Cache-Control"))
	}
	rec = op.Do(e.h, request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/reveal", id), ""))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), pw) {
		t.Fatalf("API reveal: %d %s", rec.Code, rec.Body.String())
	}
	if n := e.count(t, `SELECT count(*) FROM audit_events WHERE action = 'reveal_args' AND actor = 'olga' AND dead_letter_id = $1`, id); n != 2 {
		t.Errorf("%d reveals audited, want 2", n)
	}
	// Revealing one letter reveals nothing else, and not for later requests.
	if strings.Contains(op.Do(e.h, httptest.NewRequest("GET", fmt.Sprintf("/dead-letters/%d", id), nil)).Body.String(), card) {
		t.Error("the reveal outlived its request")
	}

	// Edit and replay with the masked payload as shown, one field changed:
	// the job gets the stored secrets and the new amount.
	shown := `{"payment":{"card_number":"•••","amount":13},"items":[{"api_token":"•••"}]}`
	rec = op.Do(e.h, request("POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id),
		`{"kwargs":`+shown+`,"args":[{"customer":"c-9","Password":"•••"}]}`))
	if rec.Code != http.StatusOK {
		t.Fatalf("edit and replay: %d %s", rec.Code, rec.Body.String())
	}
	var args, kwargs string
	if err := e.db.Get(&args, `SELECT args::text FROM jobs WHERE replay_of = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Get(&kwargs, `SELECT kwargs::text FROM jobs WHERE replay_of = $1`, id); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(args+kwargs, "•") || !strings.Contains(kwargs, card) || !strings.Contains(kwargs, `"amount": 13`) ||
		!strings.Contains(kwargs, "tok-xyz") || !strings.Contains(args, pw) {
		t.Errorf("the replayed job has args %s kwargs %s", args, kwargs)
	}
	// The audit trail keeps the edit; its pages show it masked.
	audit := op.Do(e.h, httptest.NewRequest("GET", "/api/v1/audit", nil)).Body.String()
	if strings.Contains(audit, card) {
		t.Error("the audit API shows the card number of the edit")
	}
}
