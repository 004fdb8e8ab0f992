package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// DemoOutageState is the demo incident's simulated outage as the console
// shows it: which dependency, and from when until when it is down.
type DemoOutageState struct {
	Dependency string
	From       time.Time
	Until      time.Time
	// Down: the outage is under way now; Scheduled: it is still to come
	// (by the database's clock).
	Down, Scheduled bool
}

// DemoOutage is the simulated dependency of the `redrive dev` demo
// (worker/demo's Outages, wired by the binary). It is nil outside dev: no
// panel, no route.
type DemoOutage interface {
	// Outage returns the outage, ok false when none was scheduled.
	Outage(ctx context.Context) (DemoOutageState, bool, error)
	// DeployFix ends the outage now, audited as a's demo action; a conflict
	// when there is nothing to fix.
	DeployFix(ctx context.Context, a dlq.Actor, now time.Time) error
}

// DemoDeployFixURL is where the overview's "Deploy the fix" button posts.
const DemoDeployFixURL = "/demo/deploy-fix"

// DeployDemoFix ends the demo's outage and goes back to the overview,
// where replaying the incident's group now succeeds.
func DeployDemoFix(o DemoOutage, now func() time.Time) echo.HandlerFunc {
	return func(c echo.Context) error {
		a := ActorFrom(c)
		if !a.Role.CanAct() {
			return &dlq.Error{Code: "forbidden", Message: "Only operators and admins may deploy the demo's fix."}
		}
		if err := o.DeployFix(c.Request().Context(), a.Actor, now()); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

// demoOutagePanel is the overview's panel for the demo incident, nil when
// there is no demo or no outage was scheduled.
func demoOutagePanel(c echo.Context, o DemoOutage) (*views.DemoOutagePanel, error) {
	if o == nil {
		return nil, nil
	}
	s, ok, err := o.Outage(c.Request().Context())
	if err != nil || !ok {
		return nil, err
	}
	p := &views.DemoOutagePanel{Dependency: s.Dependency, From: s.From, Until: s.Until, Down: s.Down,
		Scheduled: s.Scheduled, FixURL: DemoDeployFixURL, GroupsHref: "/groups?task=payments.charge"}
	if tok, ok := c.Get(csrfKey).(string); ok {
		p.CSRFToken = tok
	}
	if pr, ok := PrincipalFrom(c); ok {
		p.CanAct = pr.Role.CanAct()
	}
	return p, nil
}
