package replayhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replayhook"
	"github.com/redrive/redrive/store/storetest"
)

var secret = []byte(strings.Repeat("s3cr3t-", 6))

// receiver is a small replay endpoint, as a system that sends its letters
// over HTTP would run one: it checks each request's signature, runs each
// replay once however often it is delivered, and answers as it is told.
type receiver struct {
	mu sync.Mutex
	// unavailable is how many requests it answers 503 before it takes any.
	unavailable int
	// refuse is the external id of a letter it will not run (409).
	refuse    string
	requests  int
	badSigned int
	ran       map[int64]replayhook.Replay // by replay id
	// atOnce runs as the replay is taken, before the endpoint answers (a
	// system that runs it there and then, and reports it done).
	atOnce func(replayhook.Replay)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	if err := replayhook.Verify(secret, r.Header.Get(replayhook.SignatureHeader), body, time.Now(), 5*time.Minute); err != nil {
		rc.badSigned++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if rc.unavailable > 0 {
		rc.unavailable--
		http.Error(w, "billing is restarting", http.StatusServiceUnavailable)
		return
	}
	var rp replayhook.Replay
	if err := json.Unmarshal(body, &rp); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if rp.ExternalID == rc.refuse {
		http.Error(w, "order cancelled: not charging it again", http.StatusConflict)
		return
	}
	if _, seen := rc.ran[rp.ReplayID]; !seen {
		rc.ran[rp.ReplayID] = rp
		if rc.atOnce != nil {
			rc.atOnce(rp)
		}
	}
	fmt.Fprintf(w, `{"job_id": %d}`, 9000+rp.DeadLetterID)
}

// A bulk replay of an HTTP source's letters posts each to the source's
// replay endpoint, signed, trying again while it is unavailable; the
// endpoint's answer is kept, a refusal makes the letter pending again, and
// the outcomes the system reports later settle the operation.
func TestBulkReplayPostsToTheEndpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	rc := &receiver{unavailable: 2, refuse: "inv-4", ran: map[int64]replayhook.Replay{}}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)

	must(t, stores.Sources.Configure(ctx, []dlq.Source{{Name: "billing", Kind: dlq.SourceKindHTTP, ReplayURL: &endpoint.URL}}))
	var batch []dlq.IngestLetter
	for i := range 5 {
		l, err := dlq.IngestLetter{ExternalID: fmt.Sprintf("inv-%d", i), Task: "invoice.charge", Queue: "billing",
			Args: json.RawMessage(fmt.Sprintf(`[%d]`, 100+i)), ErrorClass: "CardDeclined", Message: "card declined",
			Attempts: 3, MaxAttempts: 3, FailedAt: time.Now().Add(-time.Hour)}.Normalise(time.Now())
		must(t, err)
		batch = append(batch, l)
	}
	if _, err := stores.Sources.Ingest(ctx, "billing", batch); err != nil {
		t.Fatal(err)
	}
	hook, err := replayhook.New(replayhook.Config{Source: "billing", URL: endpoint.URL, Secret: secret,
		ConsoleURL: "https://redrive.internal", Letters: stores.Letters})
	must(t, err)
	ops := stores.Operations.WithSources(map[string]dlq.ReplaySender{"billing": hook})
	// inv-0 runs there and then, and its success is reported before the
	// endpoint answers the replay.
	rc.atOnce = func(rp replayhook.Replay) {
		if rp.ExternalID != "inv-0" {
			return
		}
		if _, err := ops.ReportReplayOutcome(ctx, dlq.OutcomeReport{LetterID: rp.DeadLetterID, State: dlq.SourceReplaySucceeded}); err != nil {
			t.Errorf("an outcome reported before the answer: %v", err)
		}
	}
	op, err := ops.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: dlq.Actor{Name: "olga"}, Now: time.Now(),
		Reason: "card processor fixed", Selection: dlq.Selection{Filter: &dlq.Filter{Source: "billing", Status: dlq.StatusPending}}})
	must(t, err)
	_, err = ops.RunOperationBatch(ctx, op.ID, 100, time.Now())
	must(t, err)

	// Sent until the endpoint takes them: twice unavailable, then each
	// replay once (backing off a second or so between tries).
	storetest.WaitFor(t, 20*time.Second, "every replay to be sent", func() bool {
		_, err := ops.SendSourceReplays(ctx)
		must(t, err)
		var waiting int
		must(t, db.Get(&waiting, `SELECT count(*) FROM source_replays WHERE state IN ('waiting', 'sending')`))
		return waiting == 0
	})
	rc.mu.Lock()
	if rc.badSigned != 0 || len(rc.ran) != 4 || rc.requests != 2+5 {
		t.Errorf("the endpoint saw %d requests, %d badly signed, ran %d replays; want 7, 0 and 4", rc.requests, rc.badSigned, len(rc.ran))
	}
	for _, rp := range rc.ran {
		if rp.Source != "billing" || rp.Task != "invoice.charge" || !strings.HasPrefix(string(rp.Args), "[10") ||
			rp.OutcomeURL != fmt.Sprintf("https://redrive.internal/api/v1/letters/%d/outcome", rp.DeadLetterID) ||
			rp.OperationID == nil || *rp.OperationID != op.ID {
			t.Errorf("a replay's body: %+v", rp)
		}
	}
	rc.mu.Unlock()

	// Kept: the endpoint's answer and the job it names; the refused
	// letter is pending again, with why.
	var sent []struct {
		Letter int64   `db:"dead_letter_id"`
		State  string  `db:"state"`
		Answer *string `db:"answer"`
		Tries  int     `db:"tries"`
		Ext    string  `db:"external_id"`
	}
	must(t, db.Select(&sent, `SELECT dead_letter_id, state, answer, tries, external_id FROM source_replays ORDER BY id`))
	for _, r := range sent {
		switch {
		case r.Ext == "inv-4" && r.State != "refused":
			t.Errorf("the replay the endpoint refused is %s", r.State)
		case r.Ext == "inv-0" && r.State != "succeeded":
			t.Errorf("the replay reported done before the endpoint answered is %s", r.State)
		case r.Ext != "inv-4" && ((r.Ext != "inv-0" && r.State != "sent") || r.Answer == nil || *r.Answer != fmt.Sprintf(`200 {"job_id": %d}`, 9000+r.Letter)):
			t.Errorf("a replay the endpoint took: %+v (answer %v)", r, deref(r.Answer))
		}
	}
	var status string
	must(t, db.Get(&status, `SELECT d.status FROM dead_letters d JOIN letter_sources s ON s.dead_letter_id = d.id WHERE s.external_id = 'inv-4'`))
	if status != "pending" {
		t.Errorf("the refused letter is %s, want pending", status)
	}
	var named int
	must(t, db.Get(&named, `SELECT count(*) FROM dead_letters WHERE replay_job_id = 9000 + id`))
	if named != 4 {
		t.Errorf("%d replayed letters name the job the endpoint gave, want 4", named)
	}

	// The system reports the rest: two succeeded, one died again.
	i := 0
	for _, r := range sent {
		if r.Ext == "inv-4" || r.Ext == "inv-0" {
			continue
		}
		state := dlq.SourceReplaySucceeded
		if i == 0 {
			state = dlq.SourceReplayDiedAgain
		}
		i++
		res, err := ops.ReportReplayOutcome(ctx, dlq.OutcomeReport{LetterID: r.Letter, State: state, Message: "card declined again",
			Sources: []string{"billing"}})
		if err != nil || res.State != state || res.Repeated {
			t.Fatalf("report %s for letter %d: %+v (err %v)", state, r.Letter, res, err)
		}
	}
	_, err = ops.ReportReplayOutcome(ctx, dlq.OutcomeReport{LetterID: sent[0].Letter, State: dlq.SourceReplaySucceeded, Sources: []string{"other"}})
	if !errors.Is(err, dlq.ErrForbidden) {
		t.Errorf("a report by a token of another source: %v, want forbidden", err)
	}
	_, err = ops.RunOperationBatch(ctx, op.ID, 100, time.Now()) // the selection is exhausted: settling
	must(t, err)
	_, err = ops.FollowOperations(ctx, time.Now())
	must(t, err)
	got, err := ops.Operation(ctx, op.ID)
	must(t, err)
	if c := got.Replays; got.State != dlq.OpDone || c == nil || c.Succeeded != 3 || c.DiedAgain != 1 || c.Refused != 1 {
		t.Errorf("operation %s with replays %+v; want done: 3 succeeded, 1 died again, 1 refused", got.State, got.Replays)
	}
}

// A signature holds only for its body, its secret and its time.
func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(`{"replay_id": 1}`)
	header := replayhook.Sign(secret, now, body)
	if err := replayhook.Verify(secret, header, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("a fresh signature: %v", err)
	}
	// A rotated secret: the old and the new signature side by side.
	rotated := replayhook.Sign([]byte("another secret, at least 32 bytes long"), now, body)
	if err := replayhook.Verify(secret, rotated+","+strings.Split(header, ",")[1], body, now, 5*time.Minute); err != nil {
		t.Errorf("one of two signatures matching: %v", err)
	}
	for name, tc := range map[string]struct {
		header string
		body   []byte
		at     time.Time
	}{
		"another body":        {header, []byte(`{"replay_id": 2}`), now},
		"replayed an hour on": {header, body, now.Add(time.Hour)},
		"another secret":      {replayhook.Sign([]byte("not the secret, not the secret!!"), now, body), body, now},
		"no signature":        {"t=1", body, now},
		"empty":               {"", body, now},
	} {
		if err := replayhook.Verify(secret, tc.header, tc.body, tc.at, 5*time.Minute); !errors.Is(err, replayhook.ErrBadSignature) {
			t.Errorf("%s: %v, want a bad signature", name, err)
		}
	}
	if _, err := replayhook.New(replayhook.Config{Source: "x", Secret: []byte("short")}); err == nil {
		t.Error("a secret of 5 bytes was taken")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// The died-again guard watches replays in another system as it watches
// Redrive's own jobs: when more than its share of the first replays to
// settle die again (as the system reports them), the operation pauses, and
// until the guard has judged no more than its window is sent.
func TestDiedAgainGuardPausesAReplayOfAnotherSystem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.NewDB(t)
	stores := storetest.NewStores(db.DB)
	rc := &receiver{ran: map[int64]replayhook.Replay{}}
	endpoint := httptest.NewServer(rc)
	t.Cleanup(endpoint.Close)
	must(t, stores.Sources.Configure(ctx, []dlq.Source{{Name: "billing", Kind: dlq.SourceKindHTTP, ReplayURL: &endpoint.URL}}))
	const n = dlq.GuardWindow + 100
	var batch []dlq.IngestLetter
	for i := range n {
		l, err := dlq.IngestLetter{ExternalID: fmt.Sprintf("inv-%d", i), Task: "invoice.charge", ErrorClass: "CardDeclined",
			Message: "card declined", FailedAt: time.Now().Add(-time.Hour)}.Normalise(time.Now())
		must(t, err)
		batch = append(batch, l)
	}
	for start := 0; start < n; start += dlq.MaxIngestBatch {
		_, err := stores.Sources.Ingest(ctx, "billing", batch[start:min(start+dlq.MaxIngestBatch, n)])
		must(t, err)
	}
	hook, err := replayhook.New(replayhook.Config{Source: "billing", URL: endpoint.URL, Secret: secret, Letters: stores.Letters})
	must(t, err)
	ops := stores.Operations.WithSources(map[string]dlq.ReplaySender{"billing": hook})
	op, err := ops.CreateOperation(ctx, dlq.OperationParams{Kind: dlq.OpReplay, Actor: dlq.Actor{Name: "olga"}, Now: time.Now(),
		DiedAgainPercent: 20, Selection: dlq.Selection{Filter: &dlq.Filter{Source: "billing", Status: dlq.StatusPending}}})
	must(t, err)
	for range 3 { // the guard's window fills; later batches take nothing
		_, err := ops.RunOperationBatch(ctx, op.ID, 2000, time.Now())
		must(t, err)
	}
	_, err = ops.SendSourceReplays(ctx)
	must(t, err)
	var sent int
	must(t, db.Get(&sent, `SELECT count(*) FROM source_replays WHERE state = 'sent'`))
	if sent != dlq.GuardWindow {
		t.Fatalf("%d replays sent before the guard judged; want its window, %d", sent, dlq.GuardWindow)
	}
	// The system reports: the first hundred to settle, half died again.
	var letters []int64
	must(t, db.Select(&letters, `SELECT dead_letter_id FROM source_replays ORDER BY id LIMIT $1`, dlq.GuardSample))
	for i, id := range letters {
		state := dlq.SourceReplaySucceeded
		if i%2 == 0 {
			state = dlq.SourceReplayDiedAgain
		}
		_, err := ops.ReportReplayOutcome(ctx, dlq.OutcomeReport{LetterID: id, State: state})
		must(t, err)
	}
	_, err = ops.FollowOperations(ctx, time.Now())
	must(t, err)
	got, err := ops.Operation(ctx, op.ID)
	must(t, err)
	if got.State != dlq.OpAutoPaused || got.GuardVerdict == nil || *got.GuardVerdict != "tripped" {
		t.Errorf("after half the sample died again: state %s, verdict %v; want auto_paused, tripped", got.State, got.GuardVerdict)
	}
	_, err = ops.RunOperationBatch(ctx, op.ID, 2000, time.Now())
	must(t, err)
	var queued int
	must(t, db.Get(&queued, `SELECT count(*) FROM source_replays`))
	if queued != dlq.GuardWindow {
		t.Errorf("%d replays queued once paused; want the %d of the window, no more", queued, dlq.GuardWindow)
	}
}
