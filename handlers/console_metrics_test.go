package handlers_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// /metrics carries the domain series, read from the database at scrape time.
func TestMetricsExportDomainSeries(t *testing.T) {
	t.Parallel()
	c := overviewFixture(t)
	rec := c.do(t, http.MethodGet, "/metrics", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`redrive_domain_up 1`,
		`redrive_dead_letters{queue="default",status="pending",task="billing.charge"} 4`,
		`redrive_dead_letters{queue="default",status="replayed",task="billing.charge"} 2`,
		`redrive_dead_letters{queue="default",status="discarded",task="mail.send"} 1`,
		`redrive_jobs{queue="default",state="available"} 3`,
		`redrive_workers{state="live"} 1`,
		`redrive_workers{state="stale"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Finished jobs are not counted at scrape time.
	if strings.Contains(body, `state="dead"}`) {
		t.Error("/metrics counts dead jobs")
	}
	age := regexp.MustCompile(`redrive_worker_heartbeat_age_seconds\{worker="w-stale"\} ([0-9.e+]+)`).FindStringSubmatch(body)
	if age == nil || !strings.HasPrefix(age[1], "600") && !strings.HasPrefix(age[1], "60") {
		t.Errorf("stale worker's heartbeat age: %v", age)
	}
}
