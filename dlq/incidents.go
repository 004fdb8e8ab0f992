package dlq

import (
	"slices"
	"time"
)

// An incident is one failure seen by several tasks: the live error groups
// of different tasks that share an error class and a template. A group's
// key holds its task (grouping), so a provider answering 503 to both
// payments.charge and payments.refund makes two groups; the console shows
// them together and replays them in one operation (filter fingerprint=A,B).
//
// Incidents are computed on read, never stored: the live groups are few
// (hundreds at most, bounded by maxLiveGroups), so comparing their
// templates costs less than keeping a second grouping true through every
// merge, split and regrouping.

// Incident is the same failure in several tasks.
type Incident struct {
	// ID is the id of its oldest group (first seen first): the incident's
	// page is /incidents/<ID>, and the id stays while that group is live.
	ID         string `json:"id"`
	ErrorClass string `json:"error_class"`
	// Template is what the groups' templates share, grouping.Wildcard
	// where they differ.
	Template string `json:"template"`
	// Groups are its groups, the most pending first.
	Groups    []ErrorGroup `json:"groups"`
	Pending   int64        `json:"pending"`
	Total     int64        `json:"total"`
	LastHour  int64        `json:"last_hour"`
	FirstSeen time.Time    `json:"first_seen"`
	LastSeen  time.Time    `json:"last_seen"`
}

// Tasks returns the incident's tasks in name order.
func (i Incident) Tasks() []string {
	var tasks []string
	for _, g := range i.Groups {
		tasks = append(tasks, g.Task)
	}
	slices.Sort(tasks)
	return slices.Compact(tasks)
}

// GroupIDs returns the ids of the incident's groups, sorted: what a
// filter names to select its letters (fingerprint=A,B).
func (i Incident) GroupIDs() []string {
	ids := make([]string, len(i.Groups))
	for k, g := range i.Groups {
		ids[k] = g.Fingerprint
	}
	slices.Sort(ids)
	return ids
}

// Has reports whether the group id is one of the incident's.
func (i Incident) Has(id string) bool {
	return slices.ContainsFunc(i.Groups, func(g ErrorGroup) bool { return g.Fingerprint == id })
}
