package handlers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/views"
)

// GroupReader is what an error group's page needs from the store.
type GroupReader interface {
	Group(ctx context.Context, fingerprint string) (dlq.ErrorGroup, error)
	GroupHourly(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error)
	GroupMinutely(ctx context.Context, fingerprint string, now time.Time) ([]dlq.InflowBucket, error)
	// GroupVariables is reads.Masked's: its values come masked.
	GroupVariables(ctx context.Context, fingerprint string) (dlq.GroupVariables, error)
	GroupInflow(ctx context.Context, fingerprints []string, now time.Time) (map[string][]int64, error)
	ListDeadLetters(ctx context.Context, f dlq.Filter) (dlq.DeadLetterPage, error)
	GetDeadLetter(ctx context.Context, id int64) (dlq.DeadLetterDetail, error)
	GroupSurvivor(ctx context.Context, id string) (string, bool, error)
	// IncidentReader: the same failure in other tasks, shown above.
	IncidentReader
}

// groupPageLetters is how many of the group's letters its page lists; the
// rest are one link away, in the list filtered to the group.
const groupPageLetters = 25

// GroupHref is the page of the error group with fingerprint.
func GroupHref(fingerprint string) string {
	return "/groups/" + url.PathEscape(fingerprint)
}

// GroupPage renders /groups/{fingerprint}: what broke (its template, and
// what varies between its letters) and since when, how fast it is still
// breaking, minute by minute, a sample traceback, the newest letters, and
// the way to replay or discard the whole group.
func GroupPage(store GroupReader, now func() time.Time, version string) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), readTimeout)
		defer cancel()
		fp := c.Param("fingerprint")
		g, err := store.Group(ctx, fp)
		if errors.Is(err, dlq.ErrNotFound) {
			// A group merged into another lives on as the survivor: old
			// links, notifications and audit entries lead there. Found,
			// not moved for good: an operator may split it again.
			if into, merged, serr := store.GroupSurvivor(ctx, fp); serr == nil && merged {
				return c.Redirect(http.StatusFound, GroupHref(into))
			}
		}
		if err != nil {
			return err
		}
		t := now()
		activity, err := readGroupActivity(ctx, store, fp, t)
		if err != nil {
			return err
		}
		f, page, err := newestGroupLetters(ctx, store, g, t)
		if err != nil {
			return err
		}
		meta := Meta(c, g.ErrorClass+" in "+g.Task, "groups", version)
		v := groupView(g, t)
		if v.Incident, err = IncidentOfGroup(ctx, store, g.Fingerprint, meta.CanAct); err != nil {
			return err
		}
		addGroupActivity(&v, activity, g, t)
		if err := addGroupSample(ctx, store, &v, page); err != nil {
			return err
		}
		addGroupLetters(&v, meta, g, f, page)
		return Render(c, http.StatusOK, views.Layout(meta, views.GroupPage(v)))
	}
}

// groupActivity is how a group has been failing: its inflow at three
// scales, and what varies between its newest letters.
type groupActivity struct {
	hourly, minutely []dlq.InflowBucket
	daily            map[string][]int64
	vars             dlq.GroupVariables
}

// readGroupActivity reads the group's inflow and variables, all at the
// same now so that the charts agree with each other.
func readGroupActivity(ctx context.Context, store GroupReader, fp string, now time.Time) (groupActivity, error) {
	var a groupActivity
	var err error
	if a.hourly, err = store.GroupHourly(ctx, fp, now); err != nil {
		return groupActivity{}, err
	}
	if a.daily, err = store.GroupInflow(ctx, []string{fp}, now); err != nil {
		return groupActivity{}, err
	}
	if a.minutely, err = store.GroupMinutely(ctx, fp, now); err != nil {
		return groupActivity{}, err
	}
	if a.vars, err = store.GroupVariables(ctx, fp); err != nil {
		return groupActivity{}, err
	}
	return a, nil
}

// newestGroupLetters reads the first page of the group's letters and the
// filter that selects them: the pending ones, or all of them once none is
// pending, since a settled group shows its history.
func newestGroupLetters(ctx context.Context, store GroupReader, g dlq.ErrorGroup, now time.Time) (dlq.Filter, dlq.DeadLetterPage, error) {
	status := url.Values{"fingerprint": {g.Fingerprint}}
	if g.Pending == 0 {
		status.Set("status", dlq.StatusAll)
	}
	f, err := ParseFilter(status, now)
	if err != nil {
		return dlq.Filter{}, dlq.DeadLetterPage{}, err
	}
	f.Limit = groupPageLetters
	page, err := store.ListDeadLetters(ctx, f)
	if err != nil {
		return dlq.Filter{}, dlq.DeadLetterPage{}, err
	}
	return f, page, nil
}

// addGroupActivity puts the group's charts, each bar a link to the
// letters behind it, and its template with what varies in it on v.
func addGroupActivity(v *views.GroupPageView, a groupActivity, g dlq.ErrorGroup, now time.Time) {
	fp := g.Fingerprint
	v.Hourly = hourlyChart(a.hourly, now, groupLettersBetween(fp))
	v.Hourly.ID, v.Hourly.Title = "group-hourly", "Letters of this group per hour over the last 24 hours"
	v.Daily = dailyChart(dailyBuckets(a.daily[fp], now), now, groupLettersBetween(fp))
	v.Daily.ID, v.Daily.Title = "group-daily", "Letters of this group per day over the last 14 days"
	v.Minutely = minuteChart(a.minutely, now, g.FirstSeen, groupLettersBetween(fp))
	v.Template, v.Variables = templateView(fp, a.vars)
	v.VariablesOf, v.Unfit = variablesOf(a.vars, g.Total)
}

// addGroupSample puts the newest letter's traceback on v to stand for the
// group's; it is read through the masking store like any letter.
func addGroupSample(ctx context.Context, store GroupReader, v *views.GroupPageView, page dlq.DeadLetterPage) error {
	if len(page.Letters) == 0 {
		return nil
	}
	d, err := store.GetDeadLetter(ctx, page.Letters[0].ID)
	if err != nil {
		return err
	}
	v.SampleID, v.SampleHref, v.Traceback = d.ID, fmt.Sprintf("/dead-letters/%d", d.ID), d.Traceback
	return nil
}

// addGroupLetters puts the list of the group's letters on v, counted as
// the filter selects them (pending, or all once none is), and the actions
// an engineer who may act gets.
func addGroupLetters(v *views.GroupPageView, meta views.PageMeta, g dlq.ErrorGroup, f dlq.Filter, page dlq.DeadLetterPage) {
	count := dlq.Count{N: g.Pending, Exact: true}
	if g.Pending == 0 {
		count.N = g.Total
	}
	v.Letters = letterResults(f, page, count)
	v.Letters.CanAct, v.Letters.CSRFToken = meta.CanAct, meta.CSRFToken
	v.Letters.FilterQuery = selectionQuery(f)
	v.CanAct = meta.CanAct
	if meta.CanAct {
		v.EditHref = GroupHref(g.Fingerprint) + "/edit"
	}
	if meta.CanAct && g.Pending > 0 && len(page.Letters) > 0 {
		// The newest letter stands for the group, as its traceback does:
		// its page runs the test job and follows it.
		v.TestRunHref = fmt.Sprintf("/dead-letters/%d?test=1#test-runs", page.Letters[0].ID)
	}
	v.Pause = pauseLinks(meta)
}

// groupView maps a group to its page's header.
func groupView(g dlq.ErrorGroup, now time.Time) views.GroupPageView {
	pending := url.Values{"fingerprint": {g.Fingerprint}}
	all := url.Values{"fingerprint": {g.Fingerprint}, "status": {dlq.StatusAll}}
	bulk := func(action string) string {
		return "/dead-letters/bulk?" + url.Values{"action": {action}, "all_matching": {"1"}, "filter": {pending.Encode()}}.Encode()
	}
	return views.GroupPageView{
		Fingerprint: g.Fingerprint,
		Task:        g.Task,
		ErrorClass:  g.ErrorClass,
		Message:     g.SampleMessage,
		FirstSeen:   g.FirstSeen,
		LastSeen:    g.LastSeen,
		Pending:     views.Number(g.Pending),
		HasPending:  g.Pending > 0,
		Total:       views.Number(g.Total),
		LastHour:    views.Number(g.LastHour),
		New:         isNewGroup(g.FirstSeen, now),
		PendingHref: "/dead-letters?" + pending.Encode(),
		AllHref:     "/dead-letters?" + all.Encode(),
		TaskHref:    "/groups?" + url.Values{"task": {g.Task}}.Encode(),
		ReplayHref:  bulk(string(dlq.OpReplay)),
		DiscardHref: bulk(string(dlq.OpDiscard)),
	}
}

// groupLettersBetween links a chart bar to the group's letters (any
// status) that failed in [from, to).
func groupLettersBetween(fp string) func(from, to time.Time) string {
	return func(from, to time.Time) string {
		return "/dead-letters?" + url.Values{
			"fingerprint": {fp},
			"status":      {dlq.StatusAll},
			"since":       {from.UTC().Format(time.RFC3339)},
			"until":       {to.UTC().Format(time.RFC3339)},
		}.Encode()
	}
}

// dailyBuckets dates a group's daily inflow (oldest first, the last being
// now's UTC day) for the chart.
func dailyBuckets(days []int64, now time.Time) []dlq.InflowBucket {
	today := now.UTC().Truncate(24 * time.Hour)
	out := make([]dlq.InflowBucket, len(days))
	for i, n := range days {
		out[i] = dlq.InflowBucket{Start: today.AddDate(0, 0, i-len(days)+1), N: n}
	}
	return out
}

// newGroupWithin is how recently a group must have been first seen to be
// marked new.
const newGroupWithin = time.Hour

// isNewGroup reports whether a group first seen at first is news at now.
func isNewGroup(first, now time.Time) bool {
	return now.Sub(first) < newGroupWithin
}

// A group is spiking when its last hour holds at least spikeMin letters
// and spikeFactor times its average hour of the last 14 days: small
// numbers are noise, and a group that always runs hot is not news.
const (
	spikeMin    = 10
	spikeFactor = 3
)

// isSpiking reports whether a group's last hour stands out against its
// 14-day daily inflow (which includes that hour).
func isSpiking(lastHour int64, inflow []int64) bool {
	if lastHour < spikeMin {
		return false
	}
	var sum int64
	for _, n := range inflow {
		sum += n
	}
	hours := int64(max(1, len(inflow)*24))
	return lastHour*hours >= spikeFactor*max(0, sum-lastHour)
}

// minuteChart charts a group's letters per minute, oldest first, marking
// the minute the group was first seen when it is in the window: when an
// outage began, which an hourly bar hides.
func minuteChart(buckets []dlq.InflowBucket, now, firstSeen time.Time, lettersBetween func(from, to time.Time) string) views.BarChart {
	c := views.BarChart{
		ID: "group-minutely", Title: "Letters of this group per minute over the last 3 hours",
		YLabel: "letters", XLabel: "minute (UTC)",
		Empty: "No letters of this group in the last 3 hours.",
		Note:  "The pale bar is the current minute, still filling. Click a bar for its letters.",
	}
	for i, b := range buckets {
		end := b.Start.Add(time.Minute)
		bar := views.Bar{
			Value:   b.N,
			Tip:     fmt.Sprintf("%s UTC: %s%s", b.Start.Format("Jan 2 15:04"), letters(b.N), soFar(now, b.Start, end)),
			Current: !now.Before(b.Start) && now.Before(end),
		}
		// 180 links where most minutes are empty would be noise to
		// tab through: only bars with letters link.
		if b.N > 0 {
			bar.Href = lettersBetween(b.Start, end)
		}
		// Label the half hours; the hours stay on a narrow screen.
		if m := b.Start.Minute(); m%30 == 0 {
			bar.Label, bar.MinorLabel = b.Start.Format("15:04"), m != 0
		}
		if !firstSeen.Before(b.Start) && firstSeen.Before(end) {
			c.Marks = append(c.Marks, views.ChartMark{Bar: i, Label: "first seen " + firstSeen.UTC().Format("15:04")})
			c.Note += " The dashed line is the minute the group was first seen."
		}
		c.Bars = append(c.Bars, bar)
	}
	return c
}

// templateView maps a group's template and what varies in it to the
// page: the template in parts, its variables numbered from 1, and for each
// variable its values, each linking to the group's letters that mention
// it. A group without a template has neither; one whose letters read fit
// none has no values to tell.
func templateView(fp string, gv dlq.GroupVariables) ([]views.TemplatePart, []views.GroupVariableView) {
	if len(gv.Parts) == 0 {
		return nil, nil
	}
	var vars []views.GroupVariableView
	if gv.Fit > 0 {
		for i, v := range gv.Variables {
			vars = append(vars, variableView(fp, i+1, v, gv.Fit))
		}
	}
	parts := make([]views.TemplatePart, len(gv.Parts))
	for i, p := range gv.Parts {
		parts[i] = views.TemplatePart{Text: p.Text}
		if p.Var < 0 {
			continue
		}
		parts[i].Var = p.Var + 1
		if p.Var >= len(vars) {
			continue
		}
		parts[i].Hint = variableHint(vars[p.Var])
		if vars[p.Var].Label == nil {
			vars[p.Var].Label = variableLabel(gv.Parts, i)
		}
	}
	return parts, vars
}

// variableLabel is the variable at parts[i] in its place, what it reads
// as: the word before it and the variables between ("host ‹2›", "for ‹2›
// ‹3›"), or, for a variable that starts the template, the word after it
// ("‹1› timed").
func variableLabel(parts []dlq.TemplatePart, i int) []views.TemplatePart {
	blank := func(p dlq.TemplatePart) bool { return p.Var < 0 && strings.TrimSpace(p.Text) == "" }
	from := i
	for from > 0 && (parts[from-1].Var >= 0 || blank(parts[from-1])) {
		from--
	}
	var label []views.TemplatePart
	if from > 0 {
		label = append(label, views.TemplatePart{Text: lastWord(parts[from-1].Text)})
	}
	for _, p := range parts[from : i+1] {
		if p.Var >= 0 {
			label = append(label, views.TemplatePart{Var: p.Var + 1})
		} else {
			label = append(label, views.TemplatePart{Text: p.Text})
		}
	}
	if len(label) == 1 && i+1 < len(parts) && parts[i+1].Var < 0 {
		label = append(label, views.TemplatePart{Text: firstWord(parts[i+1].Text)})
	}
	return label
}

// variableView maps one variable and its values, out of fit letters.
func variableView(fp string, n int, v dlq.GroupVariable, fit int) views.GroupVariableView {
	out := views.GroupVariableView{N: n, Distinct: views.Number(int64(v.Distinct)), Prefix: v.Prefix}
	// Each letter its own value (an id): listing five of them, once each,
	// says nothing. A single letter's value is still worth showing.
	out.AllDifferent = v.Distinct == fit && fit > 1
	if out.AllDifferent {
		return out
	}
	for _, tv := range v.Top {
		gv := views.GroupValueView{
			Value:   tv.Value,
			Empty:   tv.Value == "",
			Hidden:  tv.Hidden,
			Share:   views.Number(int64(tv.N)) + " of " + views.Number(int64(fit)),
			Percent: int(math.Round(100 * float64(tv.N) / float64(max(fit, 1)))),
		}
		if !tv.Hidden && searchable(tv.Value) {
			gv.Href = "/dead-letters?" + url.Values{"fingerprint": {fp}, "status": {dlq.StatusAll}, "q": {tv.Value}}.Encode()
		}
		out.Values = append(out.Values, gv)
	}
	return out
}

// searchable reports whether the letter list accepts s as its search (not
// too short for its index, not too long, printable).
func searchable(s string) bool {
	_, err := ParseFilter(url.Values{"q": {s}}, time.Time{})
	return err == nil
}

// variableHint says in a line what a variable took, for the template's
// mark of it.
func variableHint(v views.GroupVariableView) string {
	switch {
	case v.AllDifferent && v.Prefix != "":
		return fmt.Sprintf("%s: %s %s, all %s…", views.VarLabel(v.N), v.Distinct, v.DistinctNoun(), v.Prefix)
	case v.AllDifferent:
		return fmt.Sprintf("%s: %s %s", views.VarLabel(v.N), v.Distinct, v.DistinctNoun())
	case len(v.Values) > 0:
		top := v.Values[0]
		value := top.Value
		if top.Empty {
			value = "nothing"
		}
		return fmt.Sprintf("%s: %s %s, most often %s (%s)", views.VarLabel(v.N), v.Distinct, v.DistinctNoun(), value, top.Share)
	default:
		return views.VarLabel(v.N)
	}
}

// variablesOf says which letters the variables were counted on, and how
// many of those did not fit the template ("" when all did).
func variablesOf(gv dlq.GroupVariables, total int64) (of, unfit string) {
	if gv.Read == 0 {
		return "", ""
	}
	if gv.Read > gv.Fit {
		unfit = views.Number(int64(gv.Read - gv.Fit))
	}
	switch {
	case int64(gv.Read) < total:
		return fmt.Sprintf("the newest %s of %s letters", views.Number(int64(gv.Read)), views.Number(total)), unfit
	case gv.Read == 1:
		return "its one letter", unfit
	default:
		return fmt.Sprintf("its %s letters", views.Number(int64(gv.Read))), unfit
	}
}

// lastWord returns the last word of s with the space after it, as the
// template reads up to its next part ("for " of "declined for ").
func lastWord(s string) string {
	word := strings.TrimRight(s, " ")
	return s[strings.LastIndexByte(word, ' ')+1:]
}

// firstWord returns the first word of s with the space before it, as the
// template reads after its previous part (" timed" of " timed out").
func firstWord(s string) string {
	word := strings.TrimLeft(s, " ")
	if end := strings.IndexByte(word, ' '); end >= 0 {
		word = word[:end]
	}
	return s[:len(s)-len(strings.TrimLeft(s, " "))] + word
}
