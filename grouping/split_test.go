package grouping

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory that keeps templates as the database
// does: Learned refuses a template whose Rev is not the stored one.
type memStore struct {
	mu        sync.Mutex
	templates map[string]Template
	merges    map[string]string
	reads     int
}

func newMemStore() *memStore {
	return &memStore{templates: map[string]Template{}, merges: map[string]string{}}
}

func (s *memStore) Templates(_ context.Context, task, class, place string) ([]Template, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	var out []Template
	for _, t := range s.templates {
		if t.Task == task && t.Class == class && t.Place == place {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Template) int { return int(a.Seq - b.Seq) })
	return out, nil
}

func (s *memStore) Learned(_ context.Context, t Template, merged []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.templates[t.ID]; ok && old.Rev != t.Rev {
		return ErrStale
	}
	s.templates[t.ID] = t
	for _, id := range merged {
		s.merges[id] = t.ID
		delete(s.templates, id)
	}
	return nil
}

// edit changes a template as an operator does: a new revision.
func (s *memStore) edit(t Template) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Rev = s.templates[t.ID].Rev + 1
	s.templates[t.ID] = t
}

func (s *memStore) get(id string) Template {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.templates[id]
}

// clock is a fake time for a Grouper.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func shipment(carrier string) Letter {
	return Letter{Task: "orders.ship", Class: "CarrierError",
		Message: "shipment rejected by carrier " + carrier + ": address not verified"}
}

// splitAt returns what an operator's split of t at position p by value
// makes of t: the value fixed there, as the store writes it.
func splitAt(t Template, p int, id, value string) Template {
	t.ID, t.Tokens, t.Fixed = id, slices.Clone(t.Tokens), slices.Clone(fixedOf(t))
	t.Tokens[p], t.Fixed[p] = value, true
	return t
}

func groupAll(t *testing.T, g *Grouper, letters ...Letter) []string {
	t.Helper()
	ids := make([]string, len(letters))
	for i, l := range letters {
		id, err := g.Group(context.Background(), l)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// TestSplitHonoured: after an operator splits a learned template at a
// variable, every Grouper takes the change in within refreshEvery, letters
// of each value go to their own group from then on, new values (three and
// more, which would make any other position a variable) go to neither,
// and a worker that learned on its old copy does not undo the split.
func TestSplitHonoured(t *testing.T) {
	store := newMemStore()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	g := New(store)
	g.now = clk.now
	// What the miner merged as it learned is what the store redirects.
	ids := g.Resolve(groupAll(t, g, shipment("dhl"), shipment("ups"), shipment("fedex"), shipment("dhl")))
	group := ids[0]
	for _, id := range ids {
		if id != group {
			t.Fatalf("three carriers in groups %v, want one learned template", ids)
		}
	}
	learned := store.get(group)
	p := slices.Index(learned.Tokens, Wildcard)
	if p < 0 || learned.Tokens[p-1] != "carrier" {
		t.Fatalf("template %q has no variable for the carrier", learned.Tokens)
	}

	// The operator splits the group by carrier: dhl keeps the id, ups and
	// fedex get groups of their own.
	store.edit(splitAt(learned, p, group, "dhl"))
	ups, fedex := splitAt(learned, p, "00000000000000a1", "ups"), splitAt(learned, p, "00000000000000a2", "fedex")
	ups.Rev, fedex.Rev, ups.Seq, fedex.Seq = 1, 1, learned.Seq+1, learned.Seq+2
	store.edit(ups)
	store.edit(fedex)

	// Another worker holding the old template widens it elsewhere: the
	// store refuses it, the split stands.
	stale := learned
	stale.Tokens = slices.Clone(learned.Tokens)
	stale.Tokens[0] = Wildcard
	if err := store.Learned(context.Background(), stale, nil); err != ErrStale {
		t.Fatalf("learning on a copy older than the split: %v, want ErrStale", err)
	}

	// Within refreshEvery the Grouper may still use its own copy; after
	// it, it has taken the split in.
	clk.advance(refreshEvery)
	for round := range 3 {
		got := groupAll(t, g, shipment("dhl"), shipment("ups"), shipment("fedex"))
		if want := []string{group, ups.ID, fedex.ID}; !slices.Equal(got, want) {
			t.Fatalf("round %d: dhl, ups, fedex in %v, want %v", round, got, want)
		}
		// New carriers arrive: three of them are enough for the miner
		// to take a position for a variable.
		news := groupAll(t, g, shipment(fmt.Sprint("carrier", string(rune('a'+round)))),
			shipment("dpd"), shipment("gls"), shipment("hermes"), shipment("tnt"))
		for i, id := range news {
			if id == group || id == ups.ID || id == fedex.ID {
				t.Fatalf("round %d: new carrier %d joined split group %s", round, i, id)
			}
		}
		clk.advance(refreshEvery)
	}
	for _, id := range []string{group, ups.ID, fedex.ID} {
		tpl := store.get(id)
		if !tpl.Fixed[p] || tpl.Tokens[p] == Wildcard {
			t.Errorf("group %s lost its split: template %q fixed %v", id, tpl.Tokens, tpl.Fixed)
		}
	}
}

// TestRefreshPeriodic: a Grouper re-reads a key it uses every
// refreshEvery even when every letter matches, and not more often.
func TestRefreshPeriodic(t *testing.T) {
	store := newMemStore()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	g := New(store)
	g.now = clk.now
	groupAll(t, g, shipment("dhl"))
	before := store.reads
	for range 100 {
		clk.advance(refreshEvery / 50)
		groupAll(t, g, shipment("dhl"))
	}
	// 100 letters over two periods: two reads.
	if got := store.reads - before; got != 2 {
		t.Errorf("%d reads over %v of matching letters, want 2", got, 2*refreshEvery)
	}
}

// TestStaleLearningRereads: when the store refuses what a Grouper learned
// (ErrStale), the letter keeps its group and the next letter of the key
// reads the templates again.
func TestStaleLearningRereads(t *testing.T) {
	store := newMemStore()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	a, b := New(store), New(store)
	a.now, b.now = clk.now, clk.now
	id := groupAll(t, a, shipment("dhl"))[0]
	groupAll(t, b, shipment("dhl"))
	// An operator edits the template; b still holds revision 0.
	tpl := store.get(id)
	store.edit(tpl)
	// A third carrier widens b's copy of the template: refused.
	got := groupAll(t, b, shipment("ups"), shipment("fedex"))
	if got[0] == "" || got[1] == "" {
		t.Fatalf("letters without a group: %v", got)
	}
	if w := store.get(id); w.Rev != 1 || slices.Contains(w.Tokens, Wildcard) {
		t.Errorf("the store took a template learned on an old copy: %q rev %d", w.Tokens, w.Rev)
	}
	before := store.reads
	groupAll(t, b, shipment("dhl"))
	if store.reads != before+1 {
		t.Errorf("%d reads of the key after the store refused what was learned, want 1", store.reads-before)
	}
}

func TestTemplateWordsAndFits(t *testing.T) {
	tpl := Template{Task: "orders.ship", Class: "CarrierError",
		Tokens: []string{"shipment", "rejected", "by", "carrier", Wildcard, "address", "not", "verified"},
		Fixed:  make([]bool, 8)}
	for _, c := range []struct {
		letter Letter
		word   string
		fits   bool
	}{
		{shipment("dhl"), "dhl", true},
		{shipment("ord_12345678AB"), Wildcard, true}, // data is masked
		{Letter{Task: "orders.ship", Class: "CarrierError", Message: "shipment rejected by carrier 'dhl' address not verified"}, "", false}, // a quoted name is fixed
		{Letter{Task: "orders.ship", Class: "CarrierError", Message: "shipment lost by carrier dhl: address not verified"}, "", false},
		{Letter{Task: "orders.refund", Class: "CarrierError", Message: shipment("dhl").Message}, "dhl", false},
	} {
		words, ok := tpl.Words(c.letter.Message)
		if ok && words[4] != c.word || ok != (c.word != "") {
			t.Errorf("Words(%q) = %q, %v; want %q at 4", c.letter.Message, words, ok, c.word)
		}
		if got := tpl.Fits(c.letter); got != c.fits {
			t.Errorf("Fits(%+v) = %v, want %v", c.letter, got, c.fits)
		}
	}
	span := tpl
	span.Span = true
	if _, ok := span.Words(shipment("dhl").Message); ok {
		t.Errorf("a span template has words per position")
	}
	if !span.Fits(shipment("dhl")) {
		t.Errorf("a span template does not fit its own message")
	}
}

// BenchmarkGroupReread is the cost of the periodic re-read on the
// dead-lettering path: the same letters grouped by a Grouper without a
// store and by one whose store answers at once (a letter reads the clock;
// one in many re-reads its key).
func BenchmarkGroupReread(b *testing.B) {
	letters := make([]Letter, 4096)
	for i := range letters {
		letters[i] = Letter{Task: fmt.Sprintf("task.%d", i%50), Class: "CarrierError",
			Message: fmt.Sprintf("shipment %d rejected by carrier %s: address not verified", i, []string{"dhl", "ups", "fedex", "dpd"}[i%4])}
	}
	for _, c := range []struct {
		name  string
		store Store
	}{{"NoStore", nil}, {"Store", newMemStore()}} {
		b.Run(c.name, func(b *testing.B) {
			g := New(c.store)
			for _, l := range letters {
				if _, err := g.Group(context.Background(), l); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := g.Group(context.Background(), letters[i%len(letters)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
