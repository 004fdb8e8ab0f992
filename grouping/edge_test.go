package grouping

import (
	"context"
	"testing"
)

// TestEmptyAndOddMessages: messages with no words, or with NUL bytes, are
// grouped like any other: no panic (an empty message beside a longer one
// used to index an empty template), and never two groups with one id (a
// NUL inside a word used to collide with clusterID's separator).
func TestEmptyAndOddMessages(t *testing.T) {
	g := New(nil)
	ctx := context.Background()
	group := func(msg string) string {
		t.Helper()
		id, err := g.Group(ctx, Letter{Task: "t", Class: "E", Message: msg})
		if err != nil {
			t.Fatalf("%q: %v", msg, err)
		}
		return id
	}
	empty := group("")
	if dots := group("..."); dots != empty {
		t.Errorf("an empty message and one of dots are two groups (%s, %s): neither has words", empty, dots)
	}
	if timeout := group("timeout"); timeout == empty {
		t.Error("a message of one word joined the group of empty messages")
	}
	group("timed out after 5s")
	group("a \x01 c A")
	group("a\x00\x01 c A")
	seen := map[string]bool{}
	for _, tpl := range g.Templates() {
		if seen[tpl.ID] {
			t.Errorf("two templates hold the id %s", tpl.ID)
		}
		seen[tpl.ID] = true
	}
}
