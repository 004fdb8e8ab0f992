package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redrive/redrive/store/letters"
	"github.com/redrive/redrive/store/storetest"
)

// Stopping dev while the console reads the mask policy, at start, is not
// an error: the search upkeep says nothing.
func TestSearchUpkeepStoppedAtStartLogsNoError(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rebuildStale(ctx, letters.New(db.DB), slog.New(slog.NewTextHandler(&logs, nil)))
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a cancelled start logged an error:\n%s", logs.String())
	}
}
