package grouping

// match returns the cluster toks would join without learning from it, or
// nil when toks would make a new cluster.
func (m *miner) match(key string, toks []token) *cluster {
	return m.find(key, toks)
}

// adopt takes in a template learned elsewhere (by another worker, read
// from the store): a cluster with its id replaces the one this miner
// holds under that id.
func (m *miner) adopt(key string, t Template) {
	c := &cluster{id: t.ID, key: key, tokens: append([]string(nil), t.Tokens...),
		fixed: append([]bool(nil), t.Fixed...), seq: t.Seq, span: t.Span}
	if len(c.fixed) != len(c.tokens) {
		c.fixed = make([]bool, len(c.tokens))
	}
	for _, b := range m.bucketsOfKey(key) {
		for _, o := range m.buckets[b] {
			if o.id == t.ID {
				c.size = o.size
				m.remove(b, o)
				break
			}
		}
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
