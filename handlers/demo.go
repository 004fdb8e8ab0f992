package handlers

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
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
		return c.Redirect(http.StatusSeeOther, "/?done="+demoFixDeployed)
	}
}

// demoFixDeployed is the overview's ?done= after "Deploy the fix", which
// says what happened.
const demoFixDeployed = "fix"

// The demo incident's tasks and the error class they fail with while the
// payments provider is down (worker/demo's payments tasks and
// ServiceUnavailableError, which handlers may not import).
var demoTasks = []string{"payments.charge", "payments.refund"}

const demoErrorClass = "ServiceUnavailable"

// demoOutagePanel is the overview's panel for the demo incident, nil when
// there is no demo or no outage was scheduled. Once the outage has begun
// it points at what it broke (demoFailure).
func demoOutagePanel(c echo.Context, o DemoOutage, groups GroupLister, incs []dlq.Incident) (*views.DemoOutagePanel, error) {
	if o == nil {
		return nil, nil
	}
	s, ok, err := o.Outage(c.Request().Context())
	if err != nil || !ok {
		return nil, err
	}
	p := &views.DemoOutagePanel{Dependency: s.Dependency, From: s.From, Until: s.Until, Down: s.Down,
		Scheduled: s.Scheduled, FixURL: DemoDeployFixURL, GroupsHref: "/groups?task=" + demoTasks[0]}
	if tok, ok := c.Get(csrfKey).(string); ok {
		p.CSRFToken = tok
	}
	if pr, ok := principal.From(c); ok {
		p.CanAct = pr.Role.CanAct()
	}
	if !p.Scheduled {
		if err := demoFailure(c.Request().Context(), p, groups, incs); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// demoFailure points the panel at what the outage broke, while it lasts
// and after: the incident of the payments tasks, or its one group while
// only one task has failed so far. The panel's replay is one operation
// over every group of it.
func demoFailure(ctx context.Context, p *views.DemoOutagePanel, groups GroupLister, incs []dlq.Incident) error {
	for _, inc := range incs {
		if inc.ErrorClass != demoErrorClass || !slices.ContainsFunc(inc.Groups, func(g dlq.ErrorGroup) bool { return slices.Contains(demoTasks, g.Task) }) {
			continue
		}
		p.FailureHref, p.FailureTitle, p.FailurePending, p.FailureTasks = IncidentHref(inc.ID),
			views.IncidentTitle(inc.ErrorClass, inc.Tasks()), inc.Pending, len(inc.Tasks())
		if p.CanAct && inc.Pending > 0 {
			p.ReplayHref = groupsBulkHref(dlq.OpReplay, inc.GroupIDs())
		}
		return nil
	}
	var found *dlq.ErrorGroup
	for _, task := range demoTasks {
		gs, err := groups.ListGroups(ctx, dlq.GroupFilter{Task: task, Sort: dlq.GroupSortLastSeen, Limit: 5})
		if err != nil {
			return err
		}
		for _, g := range gs {
			if g.ErrorClass == demoErrorClass && (found == nil || g.LastSeen.After(found.LastSeen)) {
				found = &g
			}
		}
	}
	if found == nil {
		return nil
	}
	p.FailureHref, p.FailureTitle, p.FailurePending, p.FailureTasks = GroupHref(found.Fingerprint),
		views.IncidentTitle(found.ErrorClass, []string{found.Task}), found.Pending, 1
	if p.CanAct && found.Pending > 0 {
		p.ReplayHref = groupsBulkHref(dlq.OpReplay, []string{found.Fingerprint})
	}
	return nil
}
