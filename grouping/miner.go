package grouping

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// A cluster is one learned failure: the letters of one key whose messages
// share a template.
type cluster struct {
	id  string
	key string
	// tokens is the template: constant words, and Wildcard where the
	// cluster's messages differ.
	tokens []string
	// fixed marks the positions that may never become a variable.
	fixed []bool
	// seq orders clusters by creation: the older of two merged clusters
	// survives, so that the group people have already seen keeps its id.
	seq  int64
	size int64
}

// template returns the cluster's template as text.
func (c *cluster) template() string { return strings.Join(c.tokens, " ") }

// miner learns templates online in the manner of Drain (He et al., "Drain:
// An Online Log Parsing Approach with Fixed Depth Tree", ICWS 2017): the
// messages of one key and one length are compared position by position
// with the templates learned so far; a message that shares enough of its
// words with a template joins it, and the positions where they differ
// become variables.
type miner struct {
	threshold float64
	buckets   map[string][]*cluster
	seq       int64
}

func newMiner(threshold float64) *miner {
	return &miner{threshold: threshold, buckets: map[string][]*cluster{}}
}

func bucketOf(key string, n int, first string) string {
	return key + "\x00" + strconv.Itoa(n)
}

// learned is what learning one message did.
type learned struct {
	cluster *cluster
	// created: the message made a new cluster.
	created bool
	// widened: the cluster's template gained a variable.
	widened bool
	// merged are the ids of clusters merged into cluster because its
	// wider template now covers theirs: they now mean cluster.id.
	merged []string
}

func (m *miner) learn(key string, toks []token) learned {
	b := bucketOf(key, len(toks), "")
	var best *cluster
	bestSame := -1
	for _, c := range m.buckets[b] {
		if same, ok := matches(c, toks); ok && same > bestSame {
			best, bestSame = c, same
		}
	}
	if best != nil {
		best.size++
		return learned{cluster: best}
	}
	c := m.newCluster(key, toks)
	m.buckets[b] = append(m.buckets[b], c)
	r := learned{cluster: c, created: true}
	for p := range c.tokens {
		if into, merged := m.generalise(b, r.cluster, p); into != nil {
			r.cluster, r.widened = into, true
			r.merged = append(r.merged, merged...)
		}
	}
	return r
}

// matches reports whether toks fits c's template (every constant equal,
// every variable filled by a token that may vary) and how many constants
// it shares.
func matches(c *cluster, toks []token) (int, bool) {
	same := 0
	for i, t := range toks {
		switch ct := c.tokens[i]; {
		case ct == t.text:
			same++
		case ct == Wildcard && !t.fixed:
		default:
			return 0, false
		}
	}
	return same, true
}

// minValues is how many different words a position must have taken, the
// rest of the message being equal, before the position is taken for a
// variable. Fewer, and the words name different failures: "VM Started"
// and "VM Stopped", two unique constraints, two missing keys.
const minValues = 4

// generalise looks at c's siblings at position p: the clusters of bucket b
// equal to c everywhere but at p. When they hold minValues different words
// at p, they are one failure with a variable there: the oldest survives
// with the wider template, the others merge into it. It returns the ids
// that merged and the survivor, or nil.
func (m *miner) generalise(b string, c *cluster, p int) (*cluster, []string) {
	if c.tokens[p] == Wildcard || c.fixed[p] {
		return nil, nil
	}
	var family []*cluster
	values := map[string]bool{}
	for _, o := range m.buckets[b] {
		if o.tokens[p] == Wildcard || o.fixed[p] || !equalBut(c, o, p) {
			continue
		}
		family = append(family, o)
		values[o.tokens[p]] = true
	}
	if len(values) < minValues {
		return nil, nil
	}
	oldest := family[0]
	for _, o := range family {
		if o.seq < oldest.seq {
			oldest = o
		}
	}
	// The survivor keeps its id, takes the wildcard, and absorbs the rest.
	survivor := c
	if oldest != c {
		survivor = oldest
	}
	survivor.tokens[p] = Wildcard
	var gone []string
	kept := m.buckets[b][:0]
	for _, o := range m.buckets[b] {
		if o != survivor && covers(survivor, o) {
			survivor.size += o.size
			gone = append(gone, o.id)
			continue
		}
		kept = append(kept, o)
	}
	m.buckets[b] = kept
	return survivor, gone
}

// equalBut reports whether a and b have the same template but at p.
func equalBut(a, b *cluster, p int) bool {
	for i := range a.tokens {
		if i != p && a.tokens[i] != b.tokens[i] {
			return false
		}
	}
	return true
}

func (m *miner) newCluster(key string, toks []token) *cluster {
	m.seq++
	c := &cluster{key: key, tokens: make([]string, len(toks)), fixed: make([]bool, len(toks)), seq: m.seq, size: 1}
	for i, t := range toks {
		c.tokens[i], c.fixed[i] = t.text, t.fixed
	}
	c.id = clusterID(key, c.tokens)
	return c
}

// clusterID derives a new cluster's id from its key and first template,
// so that two workers that meet the same failure first with the same
// message name it alike.
func clusterID(key string, tokens []string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + strings.Join(tokens, "\x00")))
	return hex.EncodeToString(sum[:8])
}

// similarity is the share of positions where the message has the
// template's constant word. A fixed position that differs makes the
// message another failure whatever the rest says.
func similarity(c *cluster, toks []token) (float64, bool) {
	same := 0
	for i, t := range toks {
		ct := c.tokens[i]
		if ct == Wildcard {
			if t.fixed {
				return 0, false
			}
			continue
		}
		if ct == t.text {
			same++
			continue
		}
		if c.fixed[i] || t.fixed {
			return 0, false
		}
	}
	return float64(same) / float64(len(toks)), true
}

// widen turns the positions where toks differs from c's template into
// variables, and reports whether any did.
func widen(c *cluster, toks []token) bool {
	changed := false
	for i, t := range toks {
		if c.tokens[i] != Wildcard && c.tokens[i] != t.text {
			c.tokens[i] = Wildcard
			changed = true
		}
	}
	return changed
}

// absorb merges into c the clusters of bucket b that its template now
// covers, and returns the ids that are gone. The oldest of them lends c
// its id and its place in time, so that the group people saw first is the
// one that stays.
func (m *miner) absorb(b string, c *cluster) []string {
	var gone []string
	kept := m.buckets[b][:0]
	for _, o := range m.buckets[b] {
		if o == c || !covers(c, o) {
			kept = append(kept, o)
			continue
		}
		c.size += o.size
		if o.seq < c.seq {
			o.id, c.id = c.id, o.id
			o.seq, c.seq = c.seq, o.seq
		}
		gone = append(gone, o.id)
	}
	m.buckets[b] = kept
	return gone
}

// covers reports whether every message of o would match c's template.
func covers(c, o *cluster) bool {
	for i, t := range o.tokens {
		if c.tokens[i] != Wildcard && c.tokens[i] != t {
			return false
		}
		if c.tokens[i] == Wildcard && o.fixed[i] {
			return false
		}
	}
	return true
}
