package cli

import (
	"strings"
	"testing"

	"github.com/redrive/redrive/dlq"
)

func TestParseSources(t *testing.T) {
	t.Parallel()
	const own = "postgres://redrive@db/redrive"
	got, err := parseSources(" legacy=http, orders=river ,billing=river:postgres://u:secret@other/billing", own)
	if err != nil {
		t.Fatal(err)
	}
	want := []SourceConfig{
		{Source: dlq.Source{Name: "legacy", Kind: dlq.SourceKindHTTP}},
		{Source: dlq.Source{Name: "orders", Kind: dlq.SourceKindRiver}, DatabaseURL: own},
		{Source: dlq.Source{Name: "billing", Kind: dlq.SourceKindRiver}, DatabaseURL: "postgres://u:secret@other/billing"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Kind != want[i].Kind || got[i].DatabaseURL != want[i].DatabaseURL {
			t.Errorf("source %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	for in, wantErr := range map[string]string{
		"legacy":                   "is not NAME=KIND",
		"redrive=http":             "the console's own queue",
		"a=sqs":                    `kind "sqs" is not one Redrive knows`,
		"a=http:postgres://x/y":    "only a river source names a database",
		"a=river:mysql://u:pw@x/y": `"mysql://u:xxxxx@x/y" is not a postgres:// URL`,
		"a=http,a=river":           "a is named twice",
		"bad name=http":            "the name",
	} {
		_, err := parseSources(in, own)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parseSources(%q) = %v, want an error saying %q", in, err, wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("parseSources(%q) shows the password: %v", in, err)
		}
	}
}
