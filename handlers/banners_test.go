package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/web"
	"github.com/redrive/redrive/web/webtest"
)

// TestBannersKeptForAWindow: with a banner window (as `redrive serve`
// runs), a pause made elsewhere (the CLI, a worker, another console) is in
// the banner once the window has passed, not before; one ended through
// this console leaves the banner at the next page.
func TestBannersKeptForAWindow(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	at := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	later := func(d time.Duration) { mu.Lock(); at = at.Add(d); mu.Unlock() }
	c := newConsole(t, func(cfg *web.Config) { cfg.BannerWindow, cfg.Now = web.BannerWindow, now })
	webtest.CreateUser(t, c.store.Access, "ben", dlq.RoleOperator)
	auth := []string{"Authorization", "Bearer " + webtest.Token(t, c.store.Access, "ben")}
	banner := func() int {
		t.Helper()
		rec, doc := c.page(t, "/dead-letters", auth...)
		if rec.Code != http.StatusOK {
			t.Fatalf("list: %d", rec.Code)
		}
		return byTestID(doc.Selection, "pause-banner").Length()
	}

	if banner() != 0 {
		t.Fatal("a banner before any pause")
	}
	p, err := c.store.Queue.PauseWork(context.Background(), dlq.PauseParams{Kind: "task", Name: "billing.charge",
		Reason: "provider down", Actor: dlq.Actor{Name: "cli"}, Now: now()})
	if err != nil {
		t.Fatal(err)
	}
	later(web.BannerWindow - time.Millisecond)
	if banner() != 0 {
		t.Error("a pause made elsewhere is in the banner inside the window; the page read it again")
	}
	later(time.Millisecond)
	if banner() != 1 {
		t.Fatal("a pause made elsewhere is not in the banner once the window has passed")
	}
	rec := c.do(t, http.MethodPost, fmt.Sprintf("/api/v1/pauses/%d/resume", p.Pause.ID), `{"reason":"provider back"}`, auth...)
	if rec.Code != http.StatusOK {
		t.Fatalf("resume: %d %s", rec.Code, rec.Body.String())
	}
	if banner() != 0 {
		t.Error("the pause this console ended is still in the banner of the next page")
	}
}
