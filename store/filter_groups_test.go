package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/storetest"
)

// groupsFixture is three error groups whose letters failed interleaved in
// time, so that a read of two of them has to merge their walks: every
// letter pending except every fourth of each group, replayed.
type groupsFixture struct {
	store *storetest.Stores
	db    *storetest.DB
	// pending and all are the letters of groups A and B, newest first.
	pending, all []int64
	// otherPending counts group C's pending letters, which nothing here
	// may touch.
	otherPending int
}

const (
	groupA = "00000000000000aa"
	groupB = "00000000000000bb"
	groupC = "00000000000000cc"
)

func newGroupsFixture(t *testing.T) groupsFixture {
	t.Helper()
	store, db := setup(t)
	// The letters' ids straddle two lanes' blocks, so that lanes share
	// the work.
	if _, err := db.Exec(`SELECT setval(pg_get_serial_sequence('dead_letter_records', 'id'), $1)`, operations.LaneBlock-60); err != nil {
		t.Fatal(err)
	}
	fx := groupsFixture{store: store, db: db}
	now := time.Now().UTC().Truncate(time.Second)
	type letter struct {
		id      int64
		at      time.Time
		pending bool
	}
	var ab []letter
	for i := range 40 {
		for g, fp := range []string{groupA, groupB, groupC} {
			// A's and B's letters alternate, pairs sharing a failure time:
			// the order then falls back to the id, across the walks too.
			at := now.Add(-time.Duration(3*i+g/2) * time.Minute)
			l := storetest.Letter{Task: "t.ok", Fingerprint: fp, FailedAt: at, Message: fmt.Sprintf("%s #%d", fp, i)}
			if fp == groupB {
				l.Task = "t.other" // an incident spans tasks
			}
			if i%4 == 3 {
				l.Status = "replayed"
			}
			id := storetest.InsertDeadLetter(t, db.DB, l)
			switch {
			case fp != groupC:
				ab = append(ab, letter{id, at, l.Status == ""})
			case l.Status == "":
				fx.otherPending++
			}
		}
	}
	slices.SortFunc(ab, func(a, b letter) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return int(b.id - a.id)
	})
	for _, l := range ab {
		fx.all = append(fx.all, l.id)
		if l.pending {
			fx.pending = append(fx.pending, l.id)
		}
	}
	return fx
}

// pages reads every page of f's list, limit letters at a time.
func (fx groupsFixture) pages(t *testing.T, f dlq.Filter, limit int) []int64 {
	t.Helper()
	f.Limit = limit
	var got []int64
	for range 100 {
		page, err := fx.store.Letters.ListDeadLetters(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, letterIDs(page.Letters)...)
		if page.Next == nil {
			return got
		}
		f.After = page.Next
	}
	t.Fatal("the list did not end")
	return nil
}

// TestSeveralGroupsSelectExactlyTheirLetters: a filter of two error groups
// (an incident's) lists, counts, exports, previews and replays exactly the
// letters of both, newest first across them as for one group; a bulk
// replay in batches and a discard in lanes take each pending letter of the
// two once and no other.
func TestSeveralGroupsSelectExactlyTheirLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	both := "fingerprint=" + groupB + "," + groupA

	t.Run("ListCountExport", func(t *testing.T) {
		t.Parallel()
		fx := newGroupsFixture(t)
		for _, c := range []struct {
			query string
			want  []int64
		}{
			{both, fx.pending},
			{both + "&status=all", fx.all},
		} {
			f := *filterOf(t, c.query)
			for _, limit := range []int{7, 50} {
				if got := fx.pages(t, f, limit); !slices.Equal(got, c.want) {
					t.Errorf("%s by %d: listed %v\nwant %v", c.query, limit, got, c.want)
				}
			}
			n, err := fx.store.Letters.CountDeadLetters(ctx, f)
			if err != nil || n != (dlq.Count{N: int64(len(c.want)), Exact: true}) {
				t.Errorf("%s: count %+v %v, want exactly %d", c.query, n, err, len(c.want))
			}
			var exported []int64
			if err := fx.store.Letters.EachDeadLetter(ctx, f, func(d dlq.DeadLetter) error {
				exported = append(exported, d.ID)
				return nil
			}); err != nil || !slices.Equal(exported, c.want) {
				t.Errorf("%s: exported %v %v, want %v", c.query, exported, err, c.want)
			}
		}
		// A condition besides the groups is counted from the letters, not
		// from the groups' summaries.
		f := *filterOf(t, both+"&task=t.other")
		if n, err := fx.store.Letters.CountDeadLetters(ctx, f); err != nil || n != (dlq.Count{N: 30, Exact: true}) {
			t.Errorf("group B's task: count %+v %v, want exactly 30", n, err)
		}
		if n, err := fx.store.Letters.CountNewer(ctx, *filterOf(t, both), 0); err != nil || n != int64(len(fx.pending)) {
			t.Errorf("newer than id 0: %d %v, want %d", n, err, len(fx.pending))
		}
	})

	t.Run("PreviewAndReplay", func(t *testing.T) {
		t.Parallel()
		fx := newGroupsFixture(t)
		sel := dlq.Selection{Filter: filterOf(t, both+"&status=all")}
		p, err := fx.store.Operations.PreviewSelection(ctx, sel, 5)
		if err != nil {
			t.Fatal(err)
		}
		if p.Matched != int64(len(fx.pending)) || p.Other != int64(len(fx.all)-len(fx.pending)) {
			t.Fatalf("preview: matched %d, other %d; want %d, %d", p.Matched, p.Other, len(fx.pending), len(fx.all)-len(fx.pending))
		}
		if got := letterIDs(p.Sample); !slices.Equal(got, fx.pending[:5]) {
			t.Errorf("sample %v, want the newest pending %v", got, fx.pending[:5])
		}
		if want := []dlq.TaskCount{{Task: "t.ok", N: 30}, {Task: "t.other", N: 30}}; !slices.Equal(p.ByTask, want) {
			t.Errorf("by task %v, want %v", p.ByTask, want)
		}
		op, err := fx.store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: alice, Now: time.Now(),
			Selection: sel})
		if err != nil {
			t.Fatal(err)
		}
		runToEnd(t, fx.store, op.ID, 4)
		fx.assertHandled(t, op.ID, "replayed")
	})

	t.Run("DiscardInLanes", func(t *testing.T) {
		t.Parallel()
		fx := newGroupsFixture(t)
		op, err := fx.store.Operations.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpDiscard, Actor: alice, Now: time.Now(),
			Reason: "incident closed", Selection: dlq.Selection{Filter: filterOf(t, both)}})
		if err != nil {
			t.Fatal(err)
		}
		runLanes(t, []*storetest.Stores{fx.store}, op.ID, 5)
		fx.assertHandled(t, op.ID, "discarded")
	})
}

// assertHandled checks that operation opID took every pending letter of
// groups A and B (now status) and no letter of group C.
func (fx groupsFixture) assertHandled(t *testing.T, opID int64, status string) {
	t.Helper()
	op, err := fx.store.Operations.Operation(context.Background(), opID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Done != int64(len(fx.pending)) {
		t.Errorf("the operation handled %d letters, want %d", op.Done, len(fx.pending))
	}
	var handled []int64
	if err := fx.db.Select(&handled, `SELECT d.id FROM dead_letters d JOIN audit_event_letters a ON a.dead_letter_id = d.id
		WHERE a.audit_event_id = $1 AND d.status = $2 ORDER BY d.failed_at DESC, d.id DESC`, *op.AuditEventID, status); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(handled, fx.pending) {
		t.Errorf("%s %v\nwant %v", status, handled, fx.pending)
	}
	if n := count(t, fx.db, `SELECT count(*) FROM dead_letters WHERE fingerprint = $1 AND status = 'pending'`, groupC); n != fx.otherPending {
		t.Errorf("group C has %d pending letters left, want all %d", n, fx.otherPending)
	}
	storetest.AssertSummariesMatch(t, fx.db)
}
