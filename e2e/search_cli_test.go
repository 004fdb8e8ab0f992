package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redrive/redrive/handlers"
	"github.com/redrive/redrive/store/storetest"
)

// `redrive search rebuild` stores the mask settings it is given and
// rebuilds the search text under them; a pattern either side rejects is a
// usage error that names it, and changes nothing.
func TestCLISearchRebuild(t *testing.T) {
	t.Parallel()
	db := storetest.NewDB(t)
	store := storetest.NewStores(db.DB)
	storetest.InsertDeadLetter(t, db.DB, storetest.Letter{Message: "welcome mail to ann@example.com failed",
		Kwargs: `{"note": "cli-note-value"}`})
	search := func(q string) int {
		f, err := handlers.ParseFilter(url.Values{"q": {q}, "status": {"all"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		page, err := store.Letters.ListDeadLetters(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Letters)
	}
	if search("cli-note-value") != 1 || search("ann@example.com") != 1 {
		t.Fatal("before: not found by what the default settings show")
	}

	out, code := cli(t, db, "search", "rebuild", "--mask-patterns", `\pL+@example\.com`)
	if code != 1 || !strings.Contains(out, `\\pL+@example\\.com`) || !strings.Contains(out, "PostgreSQL") {
		t.Fatalf("pattern PostgreSQL rejects: %d %s", code, out)
	}
	out, code = cli(t, db, "search", "rebuild", "--mask-keys", "password,note", "--mask-patterns", `[a-z]+@example\.com`)
	if code != 0 || !strings.Contains(out, "1 letters to rebuild") || !strings.Contains(out, "rebuilt 1 letters") {
		t.Fatalf("rebuild: %d %s", code, out)
	}
	if search("cli-note-value") != 0 || search("ann@example.com") != 0 || search("mail to •••") != 1 {
		t.Fatal("after: search does not follow the new settings")
	}
	if out, code = cli(t, db, "search", "rebuild", "--mask-keys", "password,note", "--mask-patterns", `[a-z]+@example\.com`); code != 0 ||
		!strings.Contains(out, "unchanged") || !strings.Contains(out, "rebuilt 0 letters") {
		t.Fatalf("again: %d %s", code, out)
	}
}
