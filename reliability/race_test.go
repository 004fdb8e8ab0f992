package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/store/postgres"
	"github.com/redrive/redrive/store/storetest"
)

// TestRaces runs operators against each other: the same letter replayed
// many times at once, with one idempotency key and without; bulk replays
// of the same letters through two console instances; a bulk replay racing
// a bulk discard; and two migrations at once. Each letter is acted on
// exactly once, and every answer is one a client can act on.
func TestRaces(t *testing.T) {
	t.Parallel()
	const callers = 20

	replayAll := func(t *testing.T, c *console, id int64, key string) []response {
		var wg sync.WaitGroup
		out := make([]response, callers)
		for i := range callers {
			wg.Go(func() {
				var h []string
				if key != "" {
					h = []string{"Idempotency-Key", key}
				}
				out[i] = c.do("POST", fmt.Sprintf("/api/v1/dead-letters/%d/replay", id), `{"reason":"race"}`, h...)
			})
		}
		wg.Wait()
		return out
	}

	t.Run("SingleReplaysWithOneKey", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		setupEffects(t, db.DB)
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: taskNoop})
		c := startConsole(t, db.DB)
		jobs := map[int64]bool{}
		for _, r := range replayAll(t, c, id, "one-key") {
			var body struct {
				ReplayJobID int64 `json:"replay_job_id"`
			}
			if r.err != nil || r.status >= 300 || json.Unmarshal(r.body, &body) != nil {
				t.Errorf("a retry with the same key must get the first answer, got %.300s", r)
				continue
			}
			jobs[body.ReplayJobID] = true
		}
		if n := mustCount(t, db.DB, `SELECT count(*) FROM jobs WHERE replay_of = $1`, id); n != 1 || len(jobs) != 1 {
			t.Errorf("%d callers with one key made %d jobs and were told of %d, want 1", callers, n, len(jobs))
		}
	})

	t.Run("SingleReplaysWithoutKey", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		setupEffects(t, db.DB)
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Task: taskNoop})
		c := startConsole(t, db.DB)
		won, conflicts := 0, 0
		for _, r := range replayAll(t, c, id, "") {
			switch {
			case r.err == nil && r.status < 300:
				won++
			case r.err == nil && r.status == 409:
				conflicts++
			default:
				t.Errorf("a concurrent replay must succeed or answer 409, got %.300s", r)
			}
		}
		if n := mustCount(t, db.DB, `SELECT count(*) FROM jobs WHERE replay_of = $1`, id); n != 1 || won != 1 || conflicts != callers-1 {
			t.Errorf("%d concurrent replays: %d succeeded, %d conflicts, %d jobs; want 1, %d, 1", callers, won, conflicts, n, callers-1)
		}
	})

	letters := size(2000, 20000)
	bulk := func(c *console, kind string) (int64, response) {
		r := c.do("POST", "/api/v1/dead-letters/"+kind, fmt.Sprintf(`{"filter":{"task":%q},"reason":"race","wait_seconds":0}`, taskEffect))
		var op struct {
			OperationID int64 `json:"operation_id"`
		}
		_ = json.Unmarshal(r.body, &op)
		return op.OperationID, r
	}
	// racing starts kinds at once, one per console, and waits for every
	// operation to finish.
	racing := func(t *testing.T, db *storetest.DB, kinds ...string) {
		consoles := []*console{startConsole(t, db.DB), startConsole(t, db.DB)}
		var wg sync.WaitGroup
		ops := make([]int64, len(kinds))
		for i, kind := range kinds {
			wg.Go(func() {
				id, r := bulk(consoles[i%2], kind)
				// Both may start: the runners then share the letters out.
				// Or the second may find nothing left: 400 or 409 is an
				// honest answer then.
				if r.err != nil || (r.status >= 300 && r.status != 409 && r.status != 400) {
					t.Errorf("bulk %s: %.300s", kind, r)
				}
				ops[i] = id
			})
		}
		wg.Wait()
		// Every letter handed to the queue; no worker runs here, so the
		// replays are run as one would (succeeded), and then every
		// operation ends.
		waitFor(t, size(time.Minute, 5*time.Minute), "the bulk operations to enqueue", func() bool {
			return count(db.DB, `SELECT count(*) FROM operations WHERE state NOT IN ('settling', 'done', 'cancelled', 'failed')`) == 0
		})
		if _, err := db.Exec(`UPDATE jobs SET state = 'succeeded', attempt = 1, finished_at = now() WHERE state = 'available'`); err != nil {
			t.Fatal(err)
		}
		waitFor(t, size(time.Minute, 5*time.Minute), "the bulk operations to finish", func() bool {
			return count(db.DB, `SELECT count(*) FROM operations WHERE state NOT IN ('done', 'cancelled', 'failed')`) == 0
		})
		if n := mustCount(t, db.DB, `SELECT count(*) FROM operations WHERE state <> 'done'`); n != 0 {
			t.Errorf("%d operations did not finish as done", n)
		}
	}
	checkOnce := func(t *testing.T, db *storetest.DB) (replayed, discarded int) {
		t.Helper()
		if n := mustCount(t, db.DB, `SELECT count(*) FROM dead_letters WHERE status = 'pending'`); n != 0 {
			t.Errorf("%d letters left pending", n)
		}
		if n := mustCount(t, db.DB, `SELECT count(*) FROM (SELECT replay_of FROM jobs WHERE replay_of IS NOT NULL GROUP BY replay_of HAVING count(*) > 1) d`); n != 0 {
			t.Errorf("%d letters replayed more than once", n)
		}
		if n := mustCount(t, db.DB, `SELECT count(*) FROM dead_letters d WHERE d.status = 'discarded' AND EXISTS (SELECT 1 FROM jobs j WHERE j.replay_of = d.id)`); n != 0 {
			t.Errorf("%d letters both discarded and replayed", n)
		}
		replayed = mustCount(t, db.DB, `SELECT count(*) FROM dead_letters WHERE status = 'replayed'`)
		discarded = mustCount(t, db.DB, `SELECT count(*) FROM dead_letters WHERE status = 'discarded'`)
		if jobs := mustCount(t, db.DB, `SELECT count(*) FROM jobs WHERE replay_of IS NOT NULL`); jobs != replayed {
			t.Errorf("%d replayed letters but %d replay jobs", replayed, jobs)
		}
		if replayed+discarded != letters {
			t.Errorf("%d replayed + %d discarded of %d letters", replayed, discarded, letters)
		}
		return replayed, discarded
	}

	t.Run("BulkReplaysThroughTwoConsoles", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		setupEffects(t, db.DB)
		seedEffectLetters(t, db.DB, letters, "bulk-")
		racing(t, db, "replay", "replay")
		replayed, _ := checkOnce(t, db)
		if !t.Failed() {
			figures(t, "races", "two consoles bulk-replayed the same %d letters at once: %d replayed, each once", letters, replayed)
		}
	})

	t.Run("BulkReplayRacesBulkDiscard", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		setupEffects(t, db.DB)
		seedEffectLetters(t, db.DB, letters, "versus-")
		racing(t, db, "replay", "discard")
		replayed, discarded := checkOnce(t, db)
		if !t.Failed() {
			figures(t, "races", "bulk replay against bulk discard of %d letters: %d replayed, %d discarded, none both", letters, replayed, discarded)
		}
	})

	t.Run("TwoMigrationsAtOnce", func(t *testing.T) {
		t.Parallel()
		db := storetest.NewDB(t)
		// An empty database, as a first deploy finds it.
		if _, err := db.Exec(`DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
			t.Fatal(err)
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		outs := make([][]byte, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"=migrate", "REDRIVE_REL_DSN="+db.DSN)
				outs[i], errs[i] = cmd.CombinedOutput()
			})
		}
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil {
				t.Errorf("migration %d failed: %v\n%s", i+1, errs[i], outs[i])
			}
		}
		if n := mustCount(t, db.DB, `SELECT count(*) FROM (SELECT version_id FROM goose_db_version GROUP BY version_id HAVING count(*) > 1) d`); n != 0 {
			t.Errorf("%d migrations applied twice", n)
		}
		if err := postgres.Ready(context.Background(), db.DB); err != nil {
			t.Errorf("after two migrations at once: %v", err)
		}
	})
}
