package remote

import (
	"bytes"
	"strings"
	"testing"
)

// TestSettledBarFollowsAGrowingTotal: the replays' bar is first drawn
// while only some letters are handed over; once they all are, its total
// grows, and it must still end full (it stayed at the earlier count once
// it had been full at the smaller total).
func TestSettledBarFollowsAGrowingTotal(t *testing.T) {
	var out bytes.Buffer
	p := &progress{e: newEnv(nil, &out, &out, true)}
	id := int64(1)
	step := func(state string, replayed int64, r ReplayCounts) string {
		out.Reset()
		p.show(Operation{OperationID: &id, Kind: "replay", State: state, Matched: 5, Replayed: &replayed, Replays: &r})
		return out.String()
	}
	step("running", 2, ReplayCounts{Running: 2})
	if got := step("running", 2, ReplayCounts{Succeeded: 2}); !strings.Contains(got, "(2/2)") {
		t.Fatalf("2 of 2 replays settled not drawn:\n%q", got)
	}
	step("settling", 5, ReplayCounts{Succeeded: 3, Running: 2})
	got := step("done", 5, ReplayCounts{Succeeded: 5})
	settled := got[strings.Index(got, "replays settled"):]
	if !strings.Contains(settled, "replays settled: 5 succeeded") || !strings.Contains(settled, "100%") || !strings.Contains(settled, "(5/5)") {
		t.Fatalf("the replays' bar does not end full at the grown total:\n%q", got)
	}
}
