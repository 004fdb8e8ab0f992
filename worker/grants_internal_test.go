package worker

import (
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/queue"
)

// grantOf is a grant of throttle 1 on task t, written at at for ttl.
func grantOf(slots *int, rate *float64, at time.Time, ttl time.Duration) dlq.ThrottleGrant {
	return dlq.ThrottleGrant{ThrottleID: 1, Kind: dlq.PauseTask, Name: "t", Revision: 1, Slots: slots, PerSecond: rate,
		Now: at, ExpiresAt: at.Add(ttl)}
}

func TestThrottleGrants(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	none := func(string, string) int { return 0 }

	t.Run("RoomIsSlotsLessRunning", func(t *testing.T) {
		t.Parallel()
		var g throttleGrants
		slots := 5
		g.renewed(start, []dlq.ThrottleGrant{grantOf(&slots, nil, start.Add(time.Hour), grantTTL)})
		rooms := g.rooms(start, func(kind, name string) int { return 3 })
		if len(rooms) != 1 || rooms[0] != (queue.Room{ThrottleID: 1, Revision: 1, Room: 2}) {
			t.Fatalf("rooms %+v, want throttle 1 at revision 1 with 2", rooms)
		}
		if rooms := g.rooms(start, func(kind, name string) int { return 7 }); rooms[0].Room != 0 {
			t.Fatalf("running past the grant, room %d, want 0", rooms[0].Room)
		}
	})

	// The database's clock may be anywhere: the grant lasts its ttl less
	// the margin from when the renewal was sent, by the worker's clock.
	t.Run("LapsesAMarginBeforeItsEnd", func(t *testing.T) {
		t.Parallel()
		var g throttleGrants
		slots := 5
		g.renewed(start, []dlq.ThrottleGrant{grantOf(&slots, nil, start.Add(-time.Hour), grantTTL)})
		if rooms := g.rooms(start.Add(grantTTL-grantMargin-time.Millisecond), none); len(rooms) != 1 {
			t.Fatalf("just before the margin, rooms %+v, want the grant's", rooms)
		}
		if rooms := g.rooms(start.Add(grantTTL-grantMargin), none); len(rooms) != 0 {
			t.Fatalf("at the margin, rooms %+v, want none", rooms)
		}
	})

	// A new grant's bucket starts empty and fills at its share up to
	// max(1, share); a renewal keeps the tokens, capped at the new share.
	t.Run("BucketFillsAtTheShare", func(t *testing.T) {
		t.Parallel()
		var g throttleGrants
		rate := 2.0
		g.renewed(start, []dlq.ThrottleGrant{grantOf(nil, &rate, start, grantTTL)})
		for _, tc := range []struct {
			after time.Duration
			room  int
		}{{0, 0}, {499 * time.Millisecond, 0}, {500 * time.Millisecond, 1}, {4 * time.Second, 2}} {
			var h throttleGrants
			h.renewed(start, []dlq.ThrottleGrant{grantOf(nil, &rate, start, grantTTL)})
			if rooms := h.rooms(start.Add(tc.after), none); rooms[0].Room != tc.room {
				t.Errorf("after %s, room %d, want %d", tc.after, rooms[0].Room, tc.room)
			}
		}
		g.rooms(start.Add(3*time.Second), none)
		g.spend([]dlq.Job{{Task: "t"}, {Task: "other"}})
		if rooms := g.rooms(start.Add(3*time.Second), none); rooms[0].Room != 1 {
			t.Fatalf("after a start of 2 tokens, room %d, want 1", rooms[0].Room)
		}
		half := 0.5
		g.renewed(start.Add(3*time.Second), []dlq.ThrottleGrant{grantOf(nil, &half, start, grantTTL)})
		if rooms := g.rooms(start.Add(3*time.Second), none); rooms[0].Room != 1 {
			t.Fatalf("renewed at half the rate, room %d, want the token kept (a bucket holds one at least)", rooms[0].Room)
		}
	})

	t.Run("RenewsEverySecondAtOnceWhenStaleAndSlowlyWhenFailing", func(t *testing.T) {
		t.Parallel()
		var g throttleGrants
		if g.due(start) {
			t.Fatal("due with no grant and no throttle seen")
		}
		g.stale = true
		if !g.due(start) {
			t.Fatal("not due with a throttle seen ungranted")
		}
		g.failed(start)
		if g.due(start.Add(grantRenewal - time.Millisecond)) {
			t.Fatal("due again within a second of a failure")
		}
		slots := 1
		g.renewed(start.Add(grantRenewal), []dlq.ThrottleGrant{grantOf(&slots, nil, start, grantTTL)})
		if g.due(start.Add(grantRenewal + grantRenewal/2)) {
			t.Fatal("due half a second after a renewal")
		}
		if !g.due(start.Add(2 * grantRenewal)) {
			t.Fatal("not due a second after a renewal")
		}
		g.stale = true
		if !g.due(start.Add(grantRenewal + throttleRetry)) {
			t.Fatal("not due at once when stale")
		}
	})
}
