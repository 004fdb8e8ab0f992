package grouping

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Letter is what a Grouper reads of a dead letter.
type Letter struct {
	Task      string
	Class     string
	Message   string
	Traceback string
}

// Template is one learned failure as a Store keeps it: the group's id, its
// key (task, error class, the place it failed) and its template's tokens,
// Wildcard where its letters differ.
type Template struct {
	ID     string
	Task   string
	Class  string
	Place  string
	Tokens []string
	// Fixed marks the positions that may never become a variable.
	Fixed []bool
	// Seq orders templates by creation: of two merged groups the older
	// survives.
	Seq int64
	// Span templates match messages of other lengths: a variable may
	// stand for a word or two more ("1.16 KB").
	Span bool
	// Rev counts the changes an operator made to the template (a merge
	// that widened it, a split that fixed a word of it). Learning never
	// changes it: a Store keeps what a Grouper learned only from the
	// revision it holds (see ErrStale).
	Rev int64
}

// Store keeps what Groupers learn, so that every process that groups
// letters (each worker, the seed, the regrouping) shares it.
type Store interface {
	// Templates returns the live templates of one key.
	Templates(ctx context.Context, task, class, place string) ([]Template, error)
	// Learned saves a template that is new or wider than before, and
	// merges the groups merged into it: from then on their ids mean
	// t.ID. It must be idempotent: two workers may learn the same thing.
	// It returns ErrStale, and saves nothing, when the stored template's
	// Rev is not t.Rev.
	Learned(ctx context.Context, t Template, merged []string) error
}

// ErrStale is what Store.Learned returns when an operator changed the
// template since the Grouper read it: what was learned from the old copy
// would undo the operator's change (widen a word a split fixed, narrow
// what a merge widened), so it is dropped, and the Grouper reads the key
// again before its next letter.
var ErrStale = errors.New("the template was changed since it was read")

// DefaultThreshold is the share of a message's words that must be the
// template's for the message to join it.
const DefaultThreshold = 0.5

// placeFrames is how many of the innermost application frames name the
// place a failure happened.
const placeFrames = 2

// A Grouper re-reads the templates of a key it uses from its Store at
// least every refreshEvery, so that an operator's merge or split reaches
// every worker within that time, and what other workers learned too. That
// is one indexed query per key and period, nothing beside a letter's cost.
// Before making a new group it re-reads sooner, once missRefreshEvery has
// passed: another worker may have learned the failure already.
const (
	refreshEvery     = 10 * time.Second
	missRefreshEvery = time.Second
)

// Grouper assigns letters to error groups, learning the groups' templates
// from the letters themselves. It is safe for concurrent use.
type Grouper struct {
	store Store
	now   func() time.Time

	mu    sync.Mutex
	miner *miner
	// merged maps the id of each group merged into another to the
	// group it went into.
	merged map[string]string
	// read is when each key's templates were last read from the store.
	read map[string]time.Time
	// revs holds the Rev of each template as read from the store; a
	// template the Grouper made itself is at revision 0.
	revs map[string]int64
}

// New returns a Grouper that keeps what it learns in store, or only in
// memory when store is nil.
func New(store Store) *Grouper {
	return &Grouper{
		store:  store,
		now:    time.Now,
		miner:  newMiner(DefaultThreshold),
		merged: map[string]string{},
		read:   map[string]time.Time{},
		revs:   map[string]int64{},
	}
}

// keyOf is what must be equal for two letters to be one failure before
// their messages are compared.
type keyOf struct{ task, class, place string }

func (k keyOf) String() string { return k.task + "\x00" + k.class + "\x00" + k.place }

// Group returns the id of l's error group, learning from l. When what it
// learned cannot be saved it returns the group and the error.
func (g *Grouper) Group(ctx context.Context, l Letter) (string, error) {
	k := keyOf{l.Task, l.Class, Place(l.Traceback, placeFrames)}
	ks := k.String()
	toks := tokenize(l.Message)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store != nil && g.refreshDue(ks, toks) {
		if err := g.refresh(ctx, k); err != nil {
			return "", err
		}
	}
	r := g.miner.learn(ks, toks)
	for _, id := range r.merged {
		g.merged[id] = r.cluster.id
	}
	if g.store != nil && (r.created || r.widened || len(r.merged) > 0) {
		// The letter's group stands even when it cannot be saved: what
		// was learned is learned again from the next letter like it, and
		// `redrive groups rebuild` repairs the rest.
		err := g.store.Learned(ctx, g.templateOf(k, r.cluster), r.merged)
		switch {
		case errors.Is(err, ErrStale):
			// An operator changed the key's templates: take them in
			// before the next letter, rather than learn on an old copy.
			delete(g.read, ks)
		case err != nil:
			return r.cluster.id, fmt.Errorf("group letter: %w", err)
		}
	}
	return r.cluster.id, nil
}

// refreshDue reports whether key's templates are to be read again before
// toks is grouped: every refreshEvery, and sooner when toks would make a
// new group.
func (g *Grouper) refreshDue(key string, toks []token) bool {
	since := g.now().Sub(g.read[key])
	return since >= refreshEvery || since >= missRefreshEvery && g.miner.match(key, toks) == nil
}

// refresh reads k's templates from the store into the miner: the changed
// ones replace the miner's, the new ones join them.
func (g *Grouper) refresh(ctx context.Context, k keyOf) error {
	ts, err := g.store.Templates(ctx, k.task, k.class, k.place)
	if err != nil {
		return fmt.Errorf("read templates of %s: %w", k.task, err)
	}
	g.miner.adoptAll(k.String(), ts)
	for _, t := range ts {
		g.revs[t.ID] = t.Rev
	}
	g.read[k.String()] = g.now()
	return nil
}

// templateOf returns c as a Store keeps it, at the revision it was read.
func (g *Grouper) templateOf(k keyOf, c *cluster) Template {
	t := templateOf(k, c)
	t.Rev = g.revs[c.id]
	return t
}

func templateOf(k keyOf, c *cluster) Template {
	return Template{ID: c.id, Task: k.task, Class: k.class, Place: k.place,
		Tokens: append([]string(nil), c.tokens...), Fixed: append([]bool(nil), c.fixed...), Seq: c.seq, Span: c.span}
}

// Resolve returns ids with each group merged into another replaced by the
// group it was merged into, as far as this Grouper has seen.
func (g *Grouper) Resolve(ids []string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = g.survivor(id)
	}
	return out
}

func (g *Grouper) survivor(id string) string {
	for n := 0; n < 64; n++ {
		next, ok := g.merged[id]
		if !ok || next == id {
			return id
		}
		id = next
	}
	return id
}

// Adopt takes in templates decided elsewhere, before any letter of their
// keys is grouped: a regrouping starts from an operator's merges and
// splits, which it must honour, and learns the rest.
func (g *Grouper) Adopt(ts []Template) {
	g.mu.Lock()
	defer g.mu.Unlock()
	byKey := map[string][]Template{}
	for _, t := range ts {
		k := keyOf{t.Task, t.Class, t.Place}.String()
		byKey[k] = append(byKey[k], t)
		g.revs[t.ID] = t.Rev
	}
	for k, ts := range byKey {
		g.miner.adoptAll(k, ts)
	}
}

// Templates returns every template the Grouper holds, at the revisions it
// read, for a regrouping to save at once.
func (g *Grouper) Templates() []Template {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []Template
	for _, cs := range g.miner.buckets {
		for _, c := range cs {
			out = append(out, g.templateOf(splitKey(c.key), c))
		}
	}
	return out
}

func splitKey(s string) keyOf {
	parts := strings.SplitN(s, "\x00", 3)
	for len(parts) < 3 {
		parts = append(parts, "")
	}
	return keyOf{parts[0], parts[1], parts[2]}
}
