package demo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replay"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/worker/demo"
)

// The demo incident, end to end with a real worker: while the payments
// provider is down its charges dead-letter as one group with the error a
// client would see, other traffic goes on; after "Deploy the fix" a bulk
// replay of that group succeeds, job by job, as the operation page shows.
func TestIncidentEndsWithTheFixDeployedAndTheGroupReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.startWorker(t, nil)
	outages := demo.NewOutages(b.db.DB, b.store.Audit)
	now := time.Now()
	if err := outages.Schedule(ctx, demo.PaymentsProvider, now.Add(-time.Second), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	var charges []int64
	for i := range 3 {
		charges = append(charges, b.enqueue(t, demo.TaskCharge, 3, map[string]any{
			"amount": 10 + i, "currency": "EUR", "customer": "cus_1", "card_last4": "4242", "capture": true}))
	}
	other := b.enqueue(t, demo.TaskSendReceipt, 3, map[string]any{"to": "ana@example.com"})
	b.wait(t, other, dlq.StateSucceeded)
	var fingerprint string
	for _, id := range charges {
		b.wait(t, id, dlq.StateDead)
		l := b.letter(t, id)
		if l.ErrorClass != "ServiceUnavailable" || l.Reason != dlq.ReasonExhausted ||
			!strings.Contains(l.ErrorMessage, "payments-provider returned 503 Service Unavailable for POST /v1/payment_intents") {
			t.Fatalf("letter of charge %d: %s %s %q", id, l.Reason, l.ErrorClass, l.ErrorMessage)
		}
		if fingerprint != "" && l.Fingerprint != fingerprint {
			t.Fatalf("the outage's letters are in two groups: %s and %s", fingerprint, l.Fingerprint)
		}
		fingerprint = l.Fingerprint
	}

	// Replaying before the fix only dies again: the provider is still down.
	operator := replay.Actor{Actor: dlq.Actor{Name: "ana"}, Role: dlq.RoleOperator}
	svc := replay.NewService(replay.Config{Store: b.store.Operations, Workers: b.store.Queue})
	early, err := svc.Replay(ctx, replay.ReplayRequest{ID: b.letter(t, charges[0]).ID, Actor: operator, Reason: "too soon", Key: "early"})
	if err != nil {
		t.Fatal(err)
	}
	b.wait(t, early.JobID, dlq.StateDead)

	if err := outages.DeployFix(ctx, demo.PaymentsProvider, operator.Actor, time.Now()); err != nil {
		t.Fatal(err)
	}
	if o, ok, err := outages.Read(ctx, demo.PaymentsProvider); err != nil || !ok || o.Down() {
		t.Fatalf("after the fix: %+v, %v, %v", o, ok, err)
	}
	if err := outages.DeployFix(ctx, demo.PaymentsProvider, operator.Actor, time.Now()); !errors.Is(err, dlq.ErrConflict) {
		t.Fatalf("a second fix: %v, want a conflict", err)
	}
	var audited int
	if err := b.db.Get(&audited, `SELECT count(*) FROM audit_events WHERE action = $1 AND actor = 'ana'`, dlq.ActionDemo); err != nil || audited != 1 {
		t.Fatalf("%d demo actions audited (%v), want 1", audited, err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runner := replay.NewRunner(replay.RunnerConfig{Store: b.store.Operations, PollInterval: 20 * time.Millisecond})
	go runner.Run(runCtx)
	op, err := svc.StartBulk(ctx, replay.BulkRequest{Kind: dlq.OpReplay, Actor: operator, Reason: "payments provider fixed",
		Selection: dlq.Selection{Filter: &dlq.Filter{Fingerprint: fingerprint, Status: dlq.StatusPending}}})
	if err != nil {
		t.Fatal(err)
	}
	// The pending letters of the group: two charges' and the early replay's,
	// which died again (the first charge's letter is replayed already).
	if op, err = svc.Wait(ctx, op.ID, 10*time.Second); err != nil || op.State != dlq.OpDone || op.Done != 3 {
		t.Fatalf("operation: %+v, %v", op, err)
	}
	storetest.WaitFor(t, 10*time.Second, "the 3 replayed jobs to succeed", func() bool {
		jobs, err := b.store.Operations.OperationJobs(ctx, op.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		succeeded := 0
		for _, j := range jobs {
			if j.State == dlq.StateSucceeded {
				succeeded++
			}
			if j.State == dlq.StateDead {
				t.Fatalf("a replay after the fix died again: %+v", j)
			}
		}
		return len(jobs) == 3 && succeeded == 3
	})
}
