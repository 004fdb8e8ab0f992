package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/storetest"
	"github.com/redrive/redrive/web"
)

// records hands every log record to a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r <- rec.Clone()
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// auditedStore is a store whose trail holds n entries, and its head.
func auditedStore(t *testing.T, n int) (*storetest.Stores, dlq.AuditHead) {
	t.Helper()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	ctx := context.Background()
	for range n {
		id := storetest.InsertDeadLetter(t, db.DB, storetest.Letter{})
		if _, err := store.Operations.DiscardDeadLetter(ctx, dlq.DiscardParams{ID: id, Actor: dlq.Actor{Name: "olga"}, Reason: "dup", Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	head, err := store.Audit.AuditHead(ctx)
	if err != nil || head.ID == 0 {
		t.Fatalf("head %+v %v", head, err)
	}
	return store, head
}

// The console logs the audit head at info, again and again, until its
// context ends.
func TestLogAuditHead(t *testing.T) {
	t.Parallel()
	store, head := auditedStore(t, 3)
	got := make(records, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- web.LogAuditHead(ctx, web.AuditHeadLogConfig{Source: store.Audit, Logger: slog.New(got), Every: 10 * time.Millisecond})
	}()
	for i := range 2 {
		select {
		case rec := <-got:
			attrs := map[string]string{}
			rec.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if rec.Level != slog.LevelInfo || rec.Message != "audit head" || attrs["head"] != head.String() ||
				attrs["audit_head_id"] != fmt.Sprint(head.ID) || attrs["audit_head_hash"] != head.Hash {
				t.Fatalf("line %d: %s %q %v; want the head %s", i, rec.Level, rec.Message, attrs, head)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no audit head line %d", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("LogAuditHead returned %v at shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("LogAuditHead did not stop when its context ended")
	}
}

// /metrics carries the id of the newest audit entry.
func TestMetricsAuditHeadID(t *testing.T) {
	t.Parallel()
	store, head := auditedStore(t, 2)
	h, err := web.NewServer(web.Config{DB: store.DB})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := fmt.Sprintf("redrive_audit_head_id %d\n", head.ID); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("/metrics: %d, lacks %q", rec.Code, want)
	}
}
