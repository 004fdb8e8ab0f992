package handlers

import (
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/redrive/redrive/dlq"
)

// groupSortRate is the API's one order beyond the groups page's: the
// groups whose letters arrive fastest now, for "what is breaking right
// now" (the remote CLI's `groups --sort rate`). The inflow is kept per UTC
// day (dead_letter_inflow_daily), so "now" is today so far plus yesterday:
// a whole day's worth even just after midnight.
const groupSortRate = "rate"

// rateDays is how many of the newest daily buckets make the rate. The
// order is taken over the dlq.MaxGroupLimit groups with the most pending
// letters, not over every group: a group that is filling fast has pending
// letters, and the top-N stays one bounded query plus one inflow probe per
// group.
const rateDays = 2

// groupQuery returns the query ParseGroupFilter should read, and whether
// the caller asked for the rate order (which dlq does not know).
func groupQuery(v url.Values) (url.Values, bool) {
	if strings.TrimSpace(v.Get("sort")) != groupSortRate {
		return v, false
	}
	q := maps.Clone(v)
	q.Set("sort", dlq.GroupSortPending)
	return q, true
}

// groupSortHint adds the API's own order to dlq's message about a bad sort.
func groupSortHint(err error) error {
	var ve *dlq.ValidationError
	if errors.As(err, &ve) && ve.Fields["sort"] != "" {
		fields := maps.Clone(ve.Fields)
		fields["sort"] = "must be one of " + strings.Join(append(slices.Clone(dlq.GroupSorts), groupSortRate), ", ")
		return &dlq.ValidationError{Fields: fields}
	}
	return err
}

// recentInflow is a group's letters over the last rateDays days.
func recentInflow(inflow []int64) int64 {
	var n int64
	for _, v := range inflow[max(0, len(inflow)-rateDays):] {
		n += v
	}
	return n
}

// byInflowRate orders groups by recent inflow (then most pending, then
// most recent, as the pending order breaks ties) and keeps the first limit.
func byInflowRate(groups []dlq.ErrorGroup, inflow map[string][]int64, limit int) []dlq.ErrorGroup {
	slices.SortStableFunc(groups, func(a, b dlq.ErrorGroup) int {
		ra, rb := recentInflow(inflow[a.Fingerprint]), recentInflow(inflow[b.Fingerprint])
		switch {
		case ra != rb:
			if ra > rb {
				return -1
			}
			return 1
		case a.Pending != b.Pending:
			if a.Pending > b.Pending {
				return -1
			}
			return 1
		}
		return b.LastSeen.Compare(a.LastSeen)
	})
	return groups[:min(limit, len(groups))]
}
