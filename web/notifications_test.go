package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// TestNotificationsPage: admins see where notifications go (redacted) and
// each delivery given up, with its error; nobody else sees the page.
func TestNotificationsPage(t *testing.T) {
	t.Parallel()
	const redacted = "slack https://hooks.slack.com/services/… (#3fa2c1)"
	e := newEnv(t, func(c *web.Config) { c.NotifyEndpoints = []string{redacted} })
	ctx := context.Background()
	storetest.InsertDeadLetter(t, e.db.DB, storetest.Letter{Task: "mail.send", ErrorClass: "SMTPError"})
	ep := dlq.NotificationEndpoint{Hash: "h1", Redacted: redacted}
	if n, err := e.store.Outbox.FanOutNotifications(ctx, []dlq.NotificationEndpoint{ep}, 10); err != nil || n != 1 {
		t.Fatalf("fan out: %d, %v; want the new group's event", n, err)
	}
	// A new group goes out in a digest of new groups.
	if _, err := e.store.Outbox.SealNewGroupDigests(ctx, dlq.DigestTiming{Window: time.Minute}); err != nil {
		t.Fatal(err)
	}
	due, err := e.store.Outbox.DueDigests(ctx, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due: %v, %v", due, err)
	}
	if err := e.store.Outbox.RecordDigestAttempt(ctx, dlq.DeliveryAttempt{EventID: due[0].ID, EndpointHash: "h1", Status: 502,
		Error: "answered 502 Bad Gateway: upstream down"}); err != nil {
		t.Fatal(err)
	}

	admin := e.as(t, "root", dlq.RoleAdmin)
	res := admin.Load(t, e.h, "/admin/notifications")
	body := res.Body.String()
	if res.Code != http.StatusOK {
		t.Fatalf("admin: %d %s", res.Code, body)
	}
	for _, want := range []string{redacted, `data-state="failed"`, "upstream down", "group new", `href="/groups/`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, role := range []dlq.Role{dlq.RoleOperator, dlq.RoleViewer} {
		s := e.as(t, "someone-"+string(role), role)
		if res := s.Do(e.h, httptest.NewRequest(http.MethodGet, "/admin/notifications", nil)); res.Code != http.StatusForbidden {
			t.Errorf("%s: %d; want 403", role, res.Code)
		}
	}
}
