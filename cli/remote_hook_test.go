package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRemoteCommandsAreWired: the binary hands the on-call commands to
// cli/remote, lists them in its help, and exits 2 on their usage
// mistakes as on its own.
func TestRemoteCommandsAreWired(t *testing.T) {
	var out, errOut bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(context.Background(), []string{"help"}, env{getenv: noEnv, stdout: &out, stderr: &errOut}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"letters", "groups", "replay", "discard", "operations", "REDRIVE_URL"} {
		if !strings.Contains(out.String(), cmd) {
			t.Errorf("help lacks %s:\n%s", cmd, out.String())
		}
	}
	err := run(context.Background(), []string{"groups"}, env{getenv: noEnv, stdout: &out, stderr: &errOut})
	if err == nil || !strings.Contains(err.Error(), "REDRIVE_URL") || exitCode(err) != 2 {
		t.Fatalf("groups without REDRIVE_URL: %v (exit %d); want a usage error naming REDRIVE_URL", err, exitCode(err))
	}
}
