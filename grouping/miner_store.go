package grouping

import "slices"

// match returns the cluster toks would join without learning from it, or
// nil when toks would make a new cluster.
func (m *miner) match(key string, toks []token) *cluster {
	return m.find(key, toks)
}

// adoptAll takes in the templates of key read from the store (learned by
// another worker, or changed by an operator): each that differs from the
// miner's cluster of its id replaces it, each the miner lacks joins it.
// Clusters the store no longer holds stay: their ids redirect where the
// letters are written.
func (m *miner) adoptAll(key string, ts []Template) {
	held := map[string]*cluster{}
	for _, b := range m.bucketsOfKey(key) {
		for _, c := range m.buckets[b] {
			held[c.id] = c
		}
	}
	for _, t := range ts {
		old := held[t.ID]
		if old != nil && sameTemplate(old, t) {
			continue
		}
		m.adopt(key, t, old)
	}
}

// sameTemplate reports whether c holds t's template already.
func sameTemplate(c *cluster, t Template) bool {
	return c.span == t.Span && slices.Equal(c.tokens, t.Tokens) && slices.Equal(c.fixed, fixedOf(t))
}

// adopt puts a template learned elsewhere in the miner: a cluster with
// its id, in place of old (the miner's cluster of that id, or nil).
func (m *miner) adopt(key string, t Template, old *cluster) {
	c := &cluster{id: t.ID, key: key, tokens: append([]string(nil), t.Tokens...),
		fixed: append([]bool(nil), fixedOf(t)...), seq: t.Seq, span: t.Span}
	if old != nil {
		c.size = old.size
		m.remove(m.bucketOfCluster(old), old)
	}
	m.add(m.bucketOfCluster(c), c)
	if t.Seq > m.seq {
		m.seq = t.Seq
	}
}

// bucketsOfKey lists the buckets that may hold key's clusters.
func (m *miner) bucketsOfKey(key string) []string {
	bs := []string{spanBucket(key)}
	for _, n := range m.lengths[key] {
		bs = append(bs, bucketOf(key, n, ""))
	}
	return bs
}

// Words returns message's words as a Grouper compares them with t's
// template, one per position (Wildcard where the message holds data,
// which is masked), and whether the message fits t word for word. A span
// template, whose variables take any number of words, has no word per
// position: false. An operator's split divides a group's letters by one
// of these words.
func (t Template) Words(message string) ([]string, bool) {
	if t.Span {
		return nil, false
	}
	toks := tokenize(message)
	if len(toks) != len(t.Tokens) {
		return nil, false
	}
	if _, ok := matches(&cluster{tokens: t.Tokens, fixed: fixedOf(t)}, toks); !ok {
		return nil, false
	}
	words := make([]string, len(toks))
	for i, tok := range toks {
		words[i] = tok.text
	}
	return words, true
}

// Fits reports whether a Grouper holding t could put l in t's group: the
// same task, error class and place, and a message that fits the template.
func (t Template) Fits(l Letter) bool {
	if l.Task != t.Task || l.Class != t.Class || Place(l.Traceback, placeFrames) != t.Place {
		return false
	}
	c := &cluster{tokens: t.Tokens, fixed: fixedOf(t), span: t.Span}
	toks := tokenize(l.Message)
	if t.Span {
		return spanMatch(c.tokens, c.fixed, toks, 0)
	}
	if len(toks) != len(t.Tokens) {
		return false
	}
	_, ok := matches(c, toks)
	return ok
}
