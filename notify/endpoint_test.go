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
	for _, tc := range []struct{ url, want string }{
		{"https://hooks.slack.com/services/T1/B1/abcdefgh", "slack https://hooks.slack.com/services/…"},
		{"https://user:secret@example.com/hook?token=abcd#x", "json https://example.com/hook/…"},
		{"https://discord.com/api/webhooks/123/tok_abcdefgh", "json https://discord.com/api/…"},
		{"https://example.com", "json https://example.com"},
	} {
		eps, err := notify.ParseEndpoints(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got := eps[0].Redacted()
		if !strings.HasPrefix(got, tc.want+" (#"+eps[0].Hash()[:6]+")") {
			t.Errorf("redacted %q; want %q and the hash's first 6", got, tc.want)
		}
		shown, _, _ := strings.Cut(got, " (#") // the hash is hex, not the URL
		for _, secret := range []string{"efgh", "secret", "abcd", "123", "T1"} {
			if strings.Contains(shown, secret) {
				t.Errorf("redacted %q shows %q of the URL's secret", got, secret)
			}
		}
	}
	for _, bad := range []string{"ftp://example.com/x", "hooks.slack.com/services/x", "https://", "slack:"} {
		_, err := notify.ParseEndpoints(bad)
		if err == nil || !strings.Contains(err.Error(), "want an http or https URL") {
			t.Errorf("%q: %v; want a clear refusal", bad, err)
		}
	}
}
