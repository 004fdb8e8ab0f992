package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ingestSource is the source the bench's letters come from.
const ingestSource = "bench"

// ingestHTTP measures letters another system sends, POST /api/v1/letters,
// EnqueueBatch at a time, one request at a time, EnqueueJobs in all: each
// letter checked, grouped (a few failures whose messages vary by id and
// time, as real ones do) and written once by its external id. River has
// no such API, so this figure has no ratio.
func (s *suite) ingestHTTP(ctx context.Context, e engine, round int) error {
	ctx, cancel := context.WithTimeout(ctx, s.sizes.RunTimeout)
	defer cancel()
	return s.c.withDB(ctx, "redrive_ingest_http", s.templates[e.Name()].base, func(name string) error {
		srv, err := s.serve(ctx, s.c.dsn(name), "REDRIVE_SOURCES="+ingestSource+"=http")
		if err != nil {
			s.failRecord(e, "ingest.http")
			return err
		}
		defer srv.close()
		if err := s.c.quiesce(ctx); err != nil {
			s.failRecord(e, "ingest.http")
			return err
		}
		failed := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
		start := time.Now()
		for done := 0; done < s.sizes.EnqueueJobs; {
			n := min(s.sizes.EnqueueBatch, s.sizes.EnqueueJobs-done)
			code, body, err := srv.do(ctx, http.MethodPost, "/api/v1/letters", ingestBody(done, n, failed))
			if err == nil && code != http.StatusCreated {
				err = fmt.Errorf("POST /api/v1/letters: %d %.200s", code, body)
			}
			if err != nil {
				s.failRecord(e, "ingest.http")
				return err
			}
			done += n
		}
		s.record("ingest.http", e, round, perSecond(s.sizes.EnqueueJobs, time.Since(start)))
		return nil
	})
}

// ingestFailures are the failures the bench's letters come from.
var ingestFailures = []struct{ task, class, message string }{
	{"invoices.render", "TemplateNotFound", "invoice_v2.html not found in /srv/templates/%d"},
	{"billing.charge", "ConnectionError", "connection to ledger-%d reset after 30s"},
	{"email.send", "SMTPRecipientsRefused", "recipient user%d@example.com refused: 550 mailbox unavailable"},
}

// ingestBody is a request of n letters, the first numbered from.
func ingestBody(from, n int, failedAt string) string {
	var b strings.Builder
	b.WriteString(`{"source":"` + ingestSource + `","letters":[`)
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteByte(',')
		}
		f := ingestFailures[i%len(ingestFailures)]
		fmt.Fprintf(&b, `{"external_id":"task-%d","task":%q,"args":[%d],"error_class":%q,"error":%q,`+
			`"traceback":"Traceback (most recent call last):\n  File \"tasks.py\", line 42, in run\n%s","attempts":3,"failed_at":%q}`,
			i, f.task, i, f.class, fmt.Sprintf(f.message, i), f.class, failedAt)
	}
	b.WriteString(`]}`)
	return b.String()
}
