package handlers

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// An incident is one failure in several tasks: one error group per task,
// shown together and replayed in one operation (dlq.Incident). Its page is
// /incidents/<id>, the id of its oldest group.

// IncidentReader reads incidents (reads.Masked).
type IncidentReader interface {
	Incidents(ctx context.Context) ([]dlq.Incident, error)
	IncidentOf(ctx context.Context, groupID string) (dlq.Incident, bool, error)
}

// IncidentPageReader is what an incident's page needs from the store.
type IncidentPageReader interface {
	IncidentReader
	ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error)
}

// IncidentHref is the page of the incident with id.
func IncidentHref(id string) string { return "/incidents/" + url.PathEscape(id) }

// incidentFilter selects the letters of every group of inc: pending ones,
// or all of them.
func incidentFilter(inc dlq.Incident, all bool) url.Values {
	v := url.Values{"fingerprint": {strings.Join(inc.GroupIDs(), ",")}}
	if all {
		v.Set("status", dlq.StatusAll)
	}
	return v
}

// groupsBulkHref is the confirmation of one bulk action over the pending
// letters of the groups ids. From a group's or an incident's page a replay
// starts with the canary, the pace and the died-again guard filled in
// (safeDefaults: a filter naming whole groups).
func groupsBulkHref(action dlq.OperationKind, ids []string) string {
	filter := url.Values{"fingerprint": {strings.Join(ids, ",")}}
	return "/dead-letters/bulk?" + url.Values{"action": {string(action)}, "all_matching": {"1"}, "filter": {filter.Encode()}}.Encode()
}

// groupIDPattern is an error group's id, and so an incident's.
var groupIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

// incidentPageLetters is how many letters the incident's page lists.
const incidentPageLetters = 25

// IncidentPage renders /incidents/:id. An id that names one of an
// incident's groups but not the incident redirects to the incident; an id
// in no incident (its incident dissolved: the other tasks' letters were
// replayed) redirects to that group's page, which handles merged and
// unknown groups.
func IncidentPage(store IncidentPageReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		id := c.Param("id")
		if !groupIDPattern.MatchString(id) {
			return BadRequest("invalid_id", "%q is not an incident: an incident's id is its oldest error group's, 16 hex digits.", dlq.ClipRunes(id, 40))
		}
		inc, ok, err := store.IncidentOf(ctx, id)
		if err != nil {
			return err
		}
		if !ok {
			return c.Redirect(http.StatusFound, GroupHref(id))
		}
		if inc.ID != id {
			return c.Redirect(http.StatusFound, IncidentHref(inc.ID))
		}
		f, err := ParseFilter(incidentFilter(inc, inc.Pending == 0), now())
		if err != nil {
			return err
		}
		f.Limit = incidentPageLetters
		page, err := store.ListDeadLetters(ctx, f)
		if err != nil {
			return err
		}
		meta := Meta(c, views.IncidentTitle(inc.ErrorClass, inc.Tasks()), "groups", version)
		v := incidentView(inc)
		count := dlq.Count{N: inc.Pending, Exact: true}
		if inc.Pending == 0 {
			count.N = inc.Total
		}
		v.Letters = letterResults(f, page, count)
		v.Letters.CanAct, v.Letters.CSRFToken = meta.CanAct, meta.CSRFToken
		v.Letters.FilterQuery = selectionQuery(f)
		v.CanAct = meta.CanAct
		return Render(c, http.StatusOK, views.Layout(meta, views.IncidentPage(v)))
	}
}

// incidentView maps an incident to its page, less its letters.
func incidentView(inc dlq.Incident) views.IncidentView {
	v := views.IncidentView{
		ID:          inc.ID,
		ErrorClass:  inc.ErrorClass,
		Tasks:       inc.Tasks(),
		Template:    inc.Template,
		FirstSeen:   inc.FirstSeen,
		LastSeen:    inc.LastSeen,
		Pending:     views.Number(inc.Pending),
		HasPending:  inc.Pending > 0,
		Total:       views.Number(inc.Total),
		LastHour:    views.Number(inc.LastHour),
		PendingHref: "/dead-letters?" + incidentFilter(inc, false).Encode(),
		AllHref:     "/dead-letters?" + incidentFilter(inc, true).Encode(),
		ReplayHref:  groupsBulkHref(dlq.OpReplay, inc.GroupIDs()),
		DiscardHref: groupsBulkHref(dlq.OpDiscard, inc.GroupIDs()),
	}
	var newest time.Time
	for _, g := range inc.Groups {
		if g.LastSeen.After(newest) {
			newest, v.Message = g.LastSeen, g.SampleMessage
		}
		list := url.Values{"fingerprint": {g.Fingerprint}}
		if g.Pending == 0 {
			list.Set("status", dlq.StatusAll)
		}
		v.Groups = append(v.Groups, views.IncidentGroupRow{
			Task:        g.Task,
			Fingerprint: g.Fingerprint,
			Href:        GroupHref(g.Fingerprint),
			ListHref:    "/dead-letters?" + list.Encode(),
			Pending:     views.Number(g.Pending),
			HasPending:  g.Pending > 0,
			LastHour:    views.Number(g.LastHour),
			Total:       views.Number(g.Total),
			FirstSeen:   g.FirstSeen,
			LastSeen:    g.LastSeen,
		})
	}
	return v
}

// IncidentOfGroup returns the strip an error group's page shows when the
// group is one of an incident's, or nil when it is in none. canAct offers
// the replay of the whole incident.
func IncidentOfGroup(ctx context.Context, store IncidentReader, groupID string, canAct bool) (*views.IncidentStripView, error) {
	inc, ok, err := store.IncidentOf(ctx, groupID)
	if err != nil || !ok {
		return nil, err
	}
	s := &views.IncidentStripView{Href: IncidentHref(inc.ID), Pending: views.Number(inc.Pending)}
	for _, g := range inc.Groups {
		if g.Fingerprint != groupID {
			s.Others = append(s.Others, views.IncidentStripTask{Task: g.Task, Pending: views.Number(g.Pending), Href: GroupHref(g.Fingerprint)})
		}
	}
	if canAct && inc.Pending > 0 {
		s.ReplayHref = groupsBulkHref(dlq.OpReplay, inc.GroupIDs())
	}
	return s, nil
}

// apiIncident is an incident as GET /api/v1/incidents answers it.
type apiIncident struct {
	dlq.Incident
	Tasks []string `json:"tasks"`
	// Filter selects the letters of every group of the incident, as
	// POST /api/v1/dead-letters/replay takes it: one operation for all.
	Filter struct {
		Fingerprint string `json:"fingerprint"`
	} `json:"filter"`
	URL string `json:"url"`
}

// APIIncidents answers GET /api/v1/incidents with the live incidents, the
// most pending first.
func APIIncidents(store IncidentReader) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		incs, err := store.Incidents(ctx)
		if err != nil {
			return err
		}
		out := struct {
			Items []apiIncident `json:"items"`
		}{Items: make([]apiIncident, 0, len(incs))}
		for _, inc := range incs {
			item := apiIncident{Incident: inc, Tasks: inc.Tasks(), URL: IncidentHref(inc.ID)}
			item.Filter.Fingerprint = strings.Join(inc.GroupIDs(), ",")
			out.Items = append(out.Items, item)
		}
		return c.JSON(http.StatusOK, out)
	}
}
