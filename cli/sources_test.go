package cli

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

func TestParseSources(t *testing.T) {
	t.Parallel()
	const own = "postgres://redrive@db/redrive"
	secret := strings.Repeat("k", 32)
	got, err := parseSources(" legacy=http, orders=river ,billing=river:postgres://u:secret@other/billing,shop=http:https://shop.internal/redrive/replay",
		own, "shop="+secret)
	if err != nil {
		t.Fatal(err)
	}
	want := []SourceConfig{
		{Source: dlq.Source{Name: "legacy", Kind: dlq.SourceKindHTTP}},
		{Source: dlq.Source{Name: "orders", Kind: dlq.SourceKindRiver}, DatabaseURL: own},
		{Source: dlq.Source{Name: "billing", Kind: dlq.SourceKindRiver}, DatabaseURL: "postgres://u:secret@other/billing"},
		{Source: dlq.Source{Name: "shop", Kind: dlq.SourceKindHTTP}, ReplaySecret: []byte(secret)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Kind != want[i].Kind || got[i].DatabaseURL != want[i].DatabaseURL ||
			string(got[i].ReplaySecret) != string(want[i].ReplaySecret) {
			t.Errorf("source %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	if u := got[3].ReplayURL; u == nil || *u != "https://shop.internal/redrive/replay" {
		t.Errorf("shop's replay endpoint: %v", u)
	}

	for in, wantErr := range map[string]string{
		"legacy":                   "is not NAME=KIND",
		"redrive=http":             "the console's own queue",
		"a=sqs":                    `kind "sqs" is not one Redrive knows`,
		"a=http:postgres://x/y":    "is not an http(s):// URL of its replay endpoint",
		"a=http:https://x/replay":  "needs a secret",
		"a=river:mysql://u:pw@x/y": `"mysql://u:xxxxx@x/y" is not a postgres:// URL`,
		"a=http,a=river":           "a is named twice",
		"bad name=http":            "the name",
	} {
		_, err := parseSources(in, own, "")
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseSources(%q) = %v, want an error saying %q", in, err, wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("parseSources(%q) shows the password: %v", in, err)
		}
	}

	for secrets, wantErr := range map[string]string{
		"a=short":                      "use at least 32",
		"a=" + secret + ",b=" + secret: "b is not a source named in --sources",
		"a=" + secret + ",a=" + secret: "a is named twice",
		secret:                         "is not NAME=SECRET",
	} {
		_, err := parseSources("a=http:https://a.internal/replay", own, secrets)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("--replay-secrets %q: %v, want an error saying %q", secrets, err, wantErr)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("--replay-secrets %q: the error shows the secret: %v", secrets, err)
		}
	}
	if _, err := parseSources("a=http", own, "a="+secret); err == nil || !strings.Contains(err.Error(), "names no replay endpoint") {
		t.Errorf("a secret for a source without an endpoint: %v", err)
	}
}
