package notify_test

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/notify"
)

func TestParseEndpoints(t *testing.T) {
	t.Parallel()
	eps, err := notify.ParseEndpoints(" https://hooks.slack.com/services/T1/B1/abcdefgh, json:https://example.com/hook\nslack:http://chat.local/hooks/x https://example.com/hook ")
	if err != nil {
		t.Fatal(err)
	}
	want := []notify.Endpoint{
		{URL: "https://hooks.slack.com/services/T1/B1/abcdefgh", Format: notify.FormatSlack},
		{URL: "https://example.com/hook", Format: notify.FormatJSON},
		{URL: "http://chat.local/hooks/x", Format: notify.FormatSlack},
	}
	if len(eps) != len(want) {
		t.Fatalf("endpoints %+v; want %+v (the repeated URL once)", eps, want)
	}
	for i := range want {
		if eps[i] != want[i] {
			t.Errorf("endpoint %d: %+v, want %+v", i, eps[i], want[i])
		}
	}
	if got := eps[0].Redacted(); got != "slack https://hooks.slack.com/…efgh" {
		t.Errorf("redacted %q: the token must not show", got)
	}
	for _, bad := range []string{"ftp://example.com/x", "hooks.slack.com/services/x", "https://", "slack:"} {
		_, err := notify.ParseEndpoints(bad)
		if err == nil || !strings.Contains(err.Error(), "want an http or https URL") {
			t.Errorf("%q: %v; want a clear refusal", bad, err)
		}
	}
}
