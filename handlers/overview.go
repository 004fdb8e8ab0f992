package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/principal"
	"github.com/redrive/redrive/views"
)

// OverviewReader reads the front page's numbers.
type OverviewReader interface {
	Overview(ctx context.Context) (dlq.Overview, error)
	PausesWithBacklog(ctx context.Context) ([]dlq.ActivePause, error)
	Incidents(ctx context.Context) ([]dlq.Incident, error)
	GroupLister
}

// overviewSorts are the orders the overview's top groups offer: what has
// the most waiting, what is new, what is breaking fastest now.
var overviewSorts = []views.Option{
	{Value: dlq.GroupSortPending, Label: "pending"},
	{Value: dlq.GroupSortNewest, Label: "newest"},
	{Value: dlq.GroupSortLastHour, Label: "last hour"},
}

// overviewTimeout bounds the overview's queries: the page polls itself, and
// a slow database should cost one failed refresh, not a pile of them.
const overviewTimeout = 5 * time.Second

// OverviewRefreshURL is the fragment the overview polls.
const OverviewRefreshURL = "/overview/fragment"

// Overview renders the console's front page; sources are read from the
// primary (their counts are a few rows); demo is nil outside `redrive dev`.
func Overview(store OverviewReader, sources SourcePendingReader, demo DemoOutage, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		page, err := loadOverview(c, store, sources, demo)
		if err != nil {
			return err
		}
		meta := Meta(c, "Overview", "overview", version)
		meta.Skips = []views.SkipLink{{Href: "#top-groups", Label: "Skip to top error groups"}}
		if page.Demo != nil && c.QueryParam("done") == demoFixDeployed {
			meta.Flash = &views.Flash{Kind: "ok", Message: "Deployed the fix: the " + page.Demo.Dependency + " is back up (audited). " +
				"New jobs succeed again; replay the incident's letters from the panel below, with a canary first."}
		}
		return Render(c, http.StatusOK, views.Layout(meta, views.Overview(page)))
	}
}

// OverviewFragment renders the overview's body alone, for htmx to swap in
// every few seconds without reloading the page.
func OverviewFragment(store OverviewReader, sources SourcePendingReader, demo DemoOutage) echo.HandlerFunc {
	return func(c echo.Context) error {
		page, err := loadOverview(c, store, sources, demo)
		if err != nil {
			return err
		}
		// A cached fragment would freeze the numbers.
		c.Response().Header().Set("Cache-Control", "no-store")
		return Render(c, http.StatusOK, views.Overview(page))
	}
}

func loadOverview(c echo.Context, store OverviewReader, sources SourcePendingReader, demo DemoOutage) (views.OverviewPage, error) {
	ctx, cancel := context.WithTimeout(c.Request().Context(), overviewTimeout)
	defer cancel()
	o, err := store.Overview(ctx)
	if err != nil {
		return views.OverviewPage{}, err
	}
	sort := dlq.GroupSortPending
	for _, s := range overviewSorts {
		if c.QueryParam("sort") == s.Value {
			sort = s.Value
		}
	}
	// The ranked groups come from the groups query (first seen, the last
	// hour, the 14-day trend), in the order the person chose.
	groups, spark, err := loadGroups(ctx, store, dlq.GroupFilter{Sort: sort, Limit: dlq.OverviewLimit, PendingOnly: true}, o.Now)
	if err != nil {
		return views.OverviewPage{}, err
	}
	incs, err := store.Incidents(ctx)
	if err != nil {
		return views.OverviewPage{}, err
	}
	pauses, err := store.PausesWithBacklog(ctx)
	if err != nil {
		return views.OverviewPage{}, err
	}
	srcs, err := sources.SourcesPending(ctx)
	if err != nil {
		return views.OverviewPage{}, err
	}
	p := overviewPage(o)
	p.Pauses = pauseRows(pauses)
	if p.Demo, err = demoOutagePanel(c, demo, store, incs); err != nil {
		return views.OverviewPage{}, err
	}
	p.GroupSort, p.GroupSorts = sort, overviewSorts
	if sort != dlq.GroupSortPending {
		p.RefreshURL += "?" + url.Values{"sort": {sort}}.Encode()
	}
	canAct, canAdminister := false, false
	if pr, ok := principal.From(c); ok {
		canAct, canAdminister = pr.Role.CanAct(), pr.Role.CanAdminister()
	}
	p.Groups = overviewGroups(groups, spark, incs, o.Now, canAct)
	p.Sources = overviewSources(srcs, canAdminister)
	return p, nil
}

// overviewGroups lists the top groups in their order, each incident's
// groups as one entry where the first of them ranks: one failure in
// several tasks reads as one thing to fix, not as unrelated rows. The
// entry counts all the incident's groups, ranked or not.
func overviewGroups(groups []dlq.ErrorGroup, spark map[string][]int64, incs []dlq.Incident, now time.Time, canAct bool) []views.OverviewGroup {
	byGroup := incidentsByGroup(incs)
	shown := map[int]bool{}
	var out []views.OverviewGroup
	for _, g := range groups {
		if k, ok := byGroup[g.Fingerprint]; ok {
			if !shown[k] {
				shown[k] = true
				out = append(out, views.OverviewGroup{Incident: overviewIncident(incs[k], canAct)})
			}
			continue
		}
		row := groupRow(g, spark[g.Fingerprint], now)
		out = append(out, views.OverviewGroup{
			Href:       row.Href,
			Task:       g.Task,
			ErrorClass: g.ErrorClass,
			Message:    g.SampleMessage,
			Pending:    g.Pending,
			Total:      g.Total,
			LastHour:   g.LastHour,
			FirstSeen:  g.FirstSeen,
			LastSeen:   g.LastSeen,
			New:        row.New,
			Spiking:    row.Spiking,
			Spark:      row.Spark,
		})
	}
	return out
}

// overviewIncident maps an incident to its entry among the top groups;
// its message is the sample of the group seen last.
func overviewIncident(inc dlq.Incident, canAct bool) *views.OverviewIncident {
	v := &views.OverviewIncident{Href: IncidentHref(inc.ID), ErrorClass: inc.ErrorClass, Pending: inc.Pending,
		Total: inc.Total, LastHour: inc.LastHour, FirstSeen: inc.FirstSeen, LastSeen: inc.LastSeen}
	var newest time.Time
	for _, g := range inc.Groups {
		if g.LastSeen.After(newest) {
			newest, v.Message = g.LastSeen, g.SampleMessage
		}
		v.Tasks = append(v.Tasks, views.OverviewIncidentTask{Task: g.Task, Pending: g.Pending, Href: GroupHref(g.Fingerprint)})
	}
	if canAct && inc.Pending > 0 {
		v.ReplayHref = groupsBulkHref(dlq.OpReplay, inc.GroupIDs())
	}
	return v
}

// maxStaleNamed is how many stale workers the overview's warning names;
// the workers page lists them all.
const maxStaleNamed = 5

// overviewPage maps the store's numbers to what the page shows, with every
// link pointing at the list filtered to what was counted.
func overviewPage(o dlq.Overview) views.OverviewPage {
	p := views.OverviewPage{
		Updated:    o.Now,
		RefreshURL: OverviewRefreshURL,
		Pending:    views.StatCard{Value: o.DeadLetters.Pending, Href: "/dead-letters?status=pending"},
		Replayed:   views.StatCard{Value: o.DeadLetters.Replayed, Href: "/dead-letters?status=replayed"},
		Discarded:  views.StatCard{Value: o.DeadLetters.Discarded, Href: "/dead-letters?status=discarded"},
		Hourly:     hourlyChart(o.Hourly, o.Now, lettersBetween),
		Daily:      dailyChart(o.Daily, o.Now, lettersBetween),
		Jobs:       jobMatrix(o.Jobs),
	}
	for _, w := range o.Workers {
		if w.Stale() {
			p.Workers.Stale++
			if len(p.Workers.StaleIDs) < maxStaleNamed {
				p.Workers.StaleIDs = append(p.Workers.StaleIDs, w.ID)
			}
		} else {
			p.Workers.Live++
		}
	}
	for _, t := range o.TopTasks {
		p.Tasks = append(p.Tasks, views.OverviewTask{
			Task:    t.Task,
			Pending: t.Pending,
			Href:    "/dead-letters?" + url.Values{"task": {t.Task}}.Encode(),
		})
	}
	return p
}

// lettersBetween links to every letter (any status) that failed in [from, to).
func lettersBetween(from, to time.Time) string {
	return "/dead-letters?" + url.Values{
		"status": {dlq.StatusAll},
		"since":  {from.UTC().Format(time.RFC3339)},
		"until":  {to.UTC().Format(time.RFC3339)},
	}.Encode()
}

func hourlyChart(buckets []dlq.InflowBucket, now time.Time, lettersBetween func(from, to time.Time) string) views.BarChart {
	c := views.BarChart{
		ID: "inflow-hourly", Title: "Dead letters per hour over the last 24 hours",
		YLabel: "letters", XLabel: "hour (UTC)",
		Empty: "No dead letters in the last 24 hours.",
		Note:  "The pale bar is the current hour, still filling. Click a bar for its letters.",
	}
	for i, b := range buckets {
		end := b.Start.Add(time.Hour)
		bar := views.Bar{
			Value:   b.N,
			Tip:     fmt.Sprintf("%s–%s UTC: %s%s", b.Start.Format("Jan 2 15:04"), end.Format("15:04"), letters(b.N), soFar(now, b.Start, end)),
			Href:    lettersBetween(b.Start, end),
			Current: !now.Before(b.Start) && now.Before(end),
		}
		// Label every third hour, counting back from the newest so the
		// current hour is always labelled.
		if back := len(buckets) - 1 - i; back%3 == 0 {
			bar.Label, bar.MinorLabel = b.Start.Format("15h"), back%6 != 0
		}
		c.Bars = append(c.Bars, bar)
	}
	return c
}

func dailyChart(buckets []dlq.InflowBucket, now time.Time, lettersBetween func(from, to time.Time) string) views.BarChart {
	c := views.BarChart{
		ID: "inflow-daily", Title: "Dead letters per day over the last 14 days",
		YLabel: "letters", XLabel: "day (UTC)",
		Empty: "No dead letters in the last 14 days.",
		Note:  "The pale bar is today, still filling. Click a bar for its letters.",
	}
	for i, b := range buckets {
		end := b.Start.Add(24 * time.Hour)
		bar := views.Bar{
			Value:   b.N,
			Tip:     fmt.Sprintf("%s (UTC): %s%s", b.Start.Format("Mon Jan 2"), letters(b.N), soFar(now, b.Start, end)),
			Href:    lettersBetween(b.Start, end),
			Current: !now.Before(b.Start) && now.Before(end),
		}
		if back := len(buckets) - 1 - i; back%2 == 0 {
			bar.Label, bar.MinorLabel = b.Start.Format("Jan 2"), back%4 != 0
		}
		c.Bars = append(c.Bars, bar)
	}
	return c
}

// soFar marks the bucket that is still filling.
func soFar(now, start, end time.Time) string {
	if !now.Before(start) && now.Before(end) {
		return " so far"
	}
	return ""
}

func letters(n int64) string {
	if n == 1 {
		return "1 dead letter"
	}
	return views.Number(n) + " dead letters"
}

// jobMatrix lays the job counts out as queues by states, every state a
// column so the table reads the same for every queue.
func jobMatrix(counts []dlq.JobCount) views.JobMatrix {
	var m views.JobMatrix
	for _, s := range dlq.States {
		m.States = append(m.States, string(s))
	}
	byQueue := map[string]map[dlq.State]dlq.JobCount{}
	var queues []string
	for _, c := range counts {
		if byQueue[c.Queue] == nil {
			byQueue[c.Queue] = map[dlq.State]dlq.JobCount{}
			queues = append(queues, c.Queue)
		}
		byQueue[c.Queue][c.State] = c
	}
	capped := false
	for _, q := range queues {
		row := views.JobMatrixRow{Queue: q}
		for _, s := range dlq.States {
			c := byQueue[q][s]
			text := views.Number(c.N)
			if c.Capped {
				text += "+"
				capped = true
			}
			row.Cells = append(row.Cells, views.JobCell{
				State: string(s),
				Text:  text,
				Href:  "/jobs?" + (dlq.JobFilter{Queue: q, State: s}).Values().Encode(),
				Zero:  c.N == 0,
			})
		}
		m.Rows = append(m.Rows, row)
	}
	if capped {
		m.CapNote = fmt.Sprintf("Counts stop at %s here so the page stays fast however many jobs pile up; "+
			"the jobs list counts waiting and running jobs exactly.", views.Number(dlq.OverviewCountCap))
	}
	return m
}

// incidentsByGroup maps each group of incs to its incident's index.
func incidentsByGroup(incs []dlq.Incident) map[string]int {
	m := map[string]int{}
	for i, inc := range incs {
		for _, g := range inc.Groups {
			m[g.Fingerprint] = i
		}
	}
	return m
}
