package grouping

import (
	"context"
	"sync"
)

// Letter is what a Grouper reads of a dead letter.
type Letter struct {
	Task      string
	Class     string
	Message   string
	Traceback string
}

// DefaultThreshold is the share of a message's words that must be the
// template's for the message to join it.
const DefaultThreshold = 0.5

// placeFrames is how many of the innermost application frames name the
// place a failure happened.
const placeFrames = 2

// Grouper assigns letters to error groups, learning the groups' templates
// from the letters themselves. It is safe for concurrent use.
type Grouper struct {
	mu    sync.Mutex
	miner *miner
	// merged maps the id of each group merged into another to the
	// group it went into.
	merged map[string]string
}

// New returns a Grouper that has learned nothing yet.
func New() *Grouper {
	return &Grouper{miner: newMiner(DefaultThreshold), merged: map[string]string{}}
}

// key is what must be equal for two letters to be one failure before their
// messages are compared.
func key(l Letter) string {
	return l.Task + "\x00" + l.Class + "\x00" + placeOf(l.Traceback)
}

// Group returns the id of l's error group.
func (g *Grouper) Group(ctx context.Context, l Letter) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.miner.learn(key(l), tokenize(l.Message))
	for _, id := range r.merged {
		g.merged[id] = r.cluster.id
	}
	return r.cluster.id, nil
}

// Resolve returns ids with each merged group replaced by the group it was
// merged into.
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

// placeOf is a stand-in until frames land.
func placeOf(string) string { return "" }
