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
	// span: the cluster learned from messages of different lengths, and
	// each Wildcard of its template stands for any number of words (see
	// spanMatch), not for exactly one.
	span bool
}

// template returns the cluster's template as text.
func (c *cluster) template() string { return strings.Join(c.tokens, " ") }

// miner learns templates online in the manner of Drain (He et al., "Drain:
// An Online Log Parsing Approach with Fixed Depth Tree", ICWS 2017): the
// messages of one key and one length are compared position by position
// with the templates learned so far; a message that fits a template joins
// it, and a position where enough messages differ becomes a variable.
// Messages of one failure whose variables take different numbers of words
// are joined by aligning their constant words (see align).
type miner struct {
	threshold float64
	buckets   map[string][]*cluster
	seq       int64
	// lengths are the message lengths seen per key, and count the
	// clusters per key: what align reads, and what maxClusters bounds.
	lengths map[string][]int
	count   map[string]int
}

func newMiner(threshold float64) *miner {
	return &miner{threshold: threshold, buckets: map[string][]*cluster{},
		lengths: map[string][]int{}, count: map[string]int{}}
}

// bucketOf names the clusters of key whose messages have n tokens; n < 0
// names the key's clusters of any length (span clusters).
func bucketOf(key string, n int, first string) string {
	return key + "\x00" + strconv.Itoa(n)
}

// spanBucket holds a key's span clusters.
func spanBucket(key string) string { return bucketOf(key, -1, "") }

// maxClusters bounds the clusters of one key: a key whose messages never
// repeat (a handler that puts a payload in its message) must not grow
// without end. Past it, a message joins its most similar cluster of its
// length, or the key's catch-all cluster of that length (see overflow).
const maxClusters = 1000

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

// find returns the cluster toks fits, or nil: one of its length first,
// then one of its key's span clusters.
func (m *miner) find(key string, toks []token) *cluster {
	var best *cluster
	bestSame := -1
	for _, c := range m.buckets[bucketOf(key, len(toks), "")] {
		if same, ok := matches(c, toks); ok && same > bestSame {
			best, bestSame = c, same
		}
	}
	if best != nil {
		return best
	}
	for _, c := range m.buckets[spanBucket(key)] {
		if spanMatch(c.tokens, c.fixed, toks, 0) {
			return c
		}
	}
	return nil
}

func (m *miner) learn(key string, toks []token) learned {
	if c := m.find(key, toks); c != nil {
		c.size++
		return learned{cluster: c}
	}
	b := bucketOf(key, len(toks), "")
	if m.count[key] >= maxClusters {
		return m.overflow(key, b, toks)
	}
	c := m.newCluster(key, toks)
	m.add(b, c)
	r := learned{cluster: c, created: true}
	for p := range c.tokens {
		if into, merged := m.generalise(b, r.cluster, p); into != nil {
			r.cluster, r.widened = into, true
			r.merged = append(r.merged, merged...)
		}
	}
	if into, merged := m.align(key, r.cluster); into != nil {
		r.cluster, r.widened = into, true
		r.merged = append(r.merged, merged...)
	}
	return r
}

// add puts c in bucket b.
func (m *miner) add(b string, c *cluster) {
	m.buckets[b] = append(m.buckets[b], c)
	m.count[c.key]++
	if c.span {
		return
	}
	for _, n := range m.lengths[c.key] {
		if n == len(c.tokens) {
			return
		}
	}
	m.lengths[c.key] = append(m.lengths[c.key], len(c.tokens))
}

// remove takes c out of bucket b.
func (m *miner) remove(b string, c *cluster) {
	kept := m.buckets[b][:0]
	for _, o := range m.buckets[b] {
		if o != c {
			kept = append(kept, o)
		}
	}
	m.buckets[b] = kept
	m.count[c.key]--
}

// overflow places a message of a key that has maxClusters clusters: in
// the most similar cluster of its length that shares at least threshold
// of its words, else in the key's catch-all cluster for its length, whose
// template is all variables. Either way no cluster is added but the one
// catch-all per length.
func (m *miner) overflow(key, b string, toks []token) learned {
	var best *cluster
	bestSim := m.threshold
	for _, c := range m.buckets[b] {
		if sim, ok := similarity(c, toks); ok && sim >= bestSim {
			best, bestSim = c, sim
		}
	}
	if best != nil {
		best.size++
		return learned{cluster: best}
	}
	all := make([]token, len(toks))
	for i := range all {
		all[i] = token{text: Wildcard, data: true}
	}
	c := m.newCluster(key, all)
	m.buckets[b] = append(m.buckets[b], c)
	return learned{cluster: c, created: true}
}

// matches reports whether toks fits c's template (every constant equal,
// every variable filled by a token that may vary) and how many constants
// it shares.
func matches(c *cluster, toks []token) (int, bool) {
	if c.span {
		return 0, false
	}
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
const minValues = 3

// generalise looks at c's siblings at position p: the clusters of bucket b
// equal to c everywhere but at p. When they hold minValues different words
// at p, they are one failure with a variable there: the oldest survives
// with the wider template, the others merge into it. It returns the ids
// that merged and the survivor, or nil.
func (m *miner) generalise(b string, c *cluster, p int) (*cluster, []string) {
	// The first word names the event (a function, a daemon, an
	// operation: "onStandStepChanged <*>", "sdpd startup succeeded"); it
	// is never taken for a variable. Data there is masked already.
	if p == 0 || c.fixed[p] {
		return nil, nil
	}
	family, words, wild := m.siblings(b, c, p)
	if !variableAt(words, wild, c) {
		return nil, nil
	}
	// The survivor keeps its id, takes the wildcard, and absorbs the rest.
	survivor := oldest(family)
	widen(survivor, p)
	return survivor, m.absorb(b, survivor)
}

// siblings returns the clusters of bucket b that are equal to c everywhere
// but at p (c among them), how many different words they hold at p, and
// whether one holds a variable there.
func (m *miner) siblings(b string, c *cluster, p int) (family []*cluster, words int, wild bool) {
	values := map[string]bool{}
	for _, o := range m.buckets[b] {
		if o.span || o.fixed[p] || !equalBut(c, o, p) {
			continue
		}
		family = append(family, o)
		if o.tokens[p] == Wildcard {
			wild = true
		} else {
			values[o.tokens[p]] = true
		}
	}
	return family, len(values), wild
}

// variableAt reports whether siblings that hold words different words at
// a position, and a variable there if wild, make it a variable of c's
// template: minValues words do. So does one word where data was seen (an
// id, a number: masked) when the rest of the message says enough to be
// sure it is the same message: the words are values of the data's
// variable ("invalid user test9" and "invalid user webmaster").
func variableAt(words int, wild bool, c *cluster) bool {
	if words == 0 {
		return false
	}
	return words >= minValues || wild && constants(c.tokens)-1 >= minContext
}

// oldest returns the cluster of family created first: the group people
// have seen longest keeps its id.
func oldest(family []*cluster) *cluster {
	old := family[0]
	for _, o := range family {
		if o.seq < old.seq {
			old = o
		}
	}
	return old
}

// widen makes position p of c's template a variable, and with it every
// other position that repeats p's word and may vary (see equalBut).
func widen(c *cluster, p int) {
	for i, t := range c.tokens {
		if i != p && t != Wildcard && t == c.tokens[p] && !c.fixed[i] {
			c.tokens[i] = Wildcard
		}
	}
	c.tokens[p] = Wildcard
}

// absorb merges into survivor the other clusters of bucket b that its
// template now covers, and returns their ids.
func (m *miner) absorb(b string, survivor *cluster) []string {
	var gone []string
	kept := m.buckets[b][:0]
	for _, o := range m.buckets[b] {
		if o != survivor && covers(survivor, o) {
			survivor.size += o.size
			gone = append(gone, o.id)
			m.count[o.key]--
			continue
		}
		kept = append(kept, o)
	}
	m.buckets[b] = kept
	return gone
}

// minContext is how many constant words besides the one at a position a
// message must have for data seen at that position to make it a variable.
const minContext = 2

// constants counts the constant words of a template.
func constants(tokens []string) int {
	n := 0
	for _, t := range tokens {
		if t != Wildcard {
			n++
		}
	}
	return n
}

// equalBut reports whether a and b have the same template but at p, and
// at the positions where both repeat their word at p: a value a message
// names twice ("host='x' ... resolve 'x'") varies in both places at once.
func equalBut(a, b *cluster, p int) bool {
	for i := range a.tokens {
		if i != p && a.tokens[i] != b.tokens[i] && !linked(a, b, p, i) {
			return false
		}
	}
	return true
}

// linked reports whether position i repeats position p's word in both a
// and b.
func linked(a, b *cluster, p, i int) bool {
	return a.tokens[i] == a.tokens[p] && b.tokens[i] == b.tokens[p] && !a.fixed[i] && !b.fixed[i]
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

// maxSpanWords is how many constant words a variable of a span cluster
// may take besides data: the unit of a number ("1190 bytes (1.16 KB)"
// beside "451 bytes"), the name of a special value ("LOCAL(0)" beside
// "10.100.20.250"). Two words are a phrase: "for invalid user <*>" is
// another message than "for <*>".
const maxSpanWords = 1

// maxAlign bounds the clusters align compares a new one with, newest
// first, so that a key with many clusters costs no more than this.
const maxAlign = 256

// align joins c with a cluster of its key whose messages have another
// length when the two are one message with variables of different
// lengths (see mergeable). The older survives as a span cluster with the
// merged template and takes in every cluster of the key it now covers.
// It returns the survivor and the ids that went away, or nil.
func (m *miner) align(key string, c *cluster) (*cluster, []string) {
	var into *cluster
	var tokens []string
	var fixed []bool
	m.eachOther(key, c, func(o *cluster) bool {
		if !o.span && len(o.tokens) == len(c.tokens) {
			return true
		}
		if t, f, ok := mergeable(o.tokens, o.fixed, c.tokens, c.fixed); ok {
			into, tokens, fixed = o, t, f
			return false
		}
		return true
	})
	if into == nil {
		return nil, nil
	}
	survivor, other := into, c
	if c.seq < into.seq {
		survivor, other = c, into
	}
	m.remove(m.bucketOfCluster(other), other)
	m.remove(m.bucketOfCluster(survivor), survivor)
	survivor.tokens, survivor.fixed, survivor.span = tokens, fixed, true
	survivor.size += other.size
	m.add(spanBucket(key), survivor)
	gone := []string{other.id}
	var covered []*cluster
	m.eachOther(key, survivor, func(o *cluster) bool {
		if coversSpan(survivor, o) {
			covered = append(covered, o)
		}
		return true
	})
	for _, o := range covered {
		m.remove(m.bucketOfCluster(o), o)
		survivor.size += o.size
		if o.seq < survivor.seq {
			// The group seen first keeps its id.
			o.id, survivor.id = survivor.id, o.id
			o.seq, survivor.seq = survivor.seq, o.seq
		}
		gone = append(gone, o.id)
	}
	return survivor, gone
}

// eachOther calls f with the clusters of key but c, span clusters first,
// then the newest maxAlign of the others, until f returns false.
func (m *miner) eachOther(key string, c *cluster, f func(*cluster) bool) {
	for _, o := range m.buckets[spanBucket(key)] {
		if o != c && !f(o) {
			return
		}
	}
	n := 0
	for _, l := range m.lengths[key] {
		cs := m.buckets[bucketOf(key, l, "")]
		for i := len(cs) - 1; i >= 0 && n < maxAlign; i-- {
			if cs[i] == c {
				continue
			}
			n++
			if !f(cs[i]) {
				return
			}
		}
	}
}

func (m *miner) bucketOfCluster(c *cluster) string {
	if c.span {
		return spanBucket(c.key)
	}
	return bucketOf(c.key, len(c.tokens), "")
}

// mergeable aligns two templates on their common constant words (their
// longest common subsequence) and reports whether they are one message,
// with the merged template: each stretch between two common words where
// they differ becomes one variable. They are one message when every such
// stretch holds a variable on at least one side and new words on at most
// one side, at most maxSpanWords of them, and no fixed word; when the
// first word is common (it names the event); and when the common words
// are at least two and half of either's constant words. So "<*> bytes
// sent" and "<*> bytes <*> KB sent" are one, while "<*> timed out" and
// "<*> declined" (words against words), or "failed" and "failed for user
// root" (words without data), are not.
func mergeable(a []string, af []bool, b []string, bf []bool) ([]string, []bool, bool) {
	if !sameEvent(a, b) {
		return nil, nil, false
	}
	pairs := lcs(a, b)
	if len(pairs) < 2 || !halfOfEach(len(pairs), a, b) {
		return nil, nil, false
	}
	var tokens []string
	var fixed []bool
	ai, bi := 0, 0
	for k := 0; k <= len(pairs); k++ {
		aj, bj := len(a), len(b)
		if k < len(pairs) {
			aj, bj = pairs[k][0], pairs[k][1]
		}
		sa := stretch{tokens: a[ai:aj], fixed: af[ai:aj], first: ai == 0}
		sb := stretch{tokens: b[bi:bj], fixed: bf[bi:bj], first: bi == 0}
		if !joinable(sa, sb) {
			return nil, nil, false
		}
		if aj > ai || bj > bi {
			tokens, fixed = append(tokens, Wildcard), append(fixed, false)
		}
		if k < len(pairs) {
			tokens = append(tokens, a[aj])
			fixed = append(fixed, af[aj] || bf[bj])
			ai, bi = aj+1, bj+1
		}
	}
	return tokens, fixed, true
}

// sameEvent reports whether two templates may name one event: their first
// words are equal, or one is a variable.
func sameEvent(a, b []string) bool {
	// A message without words (empty, or dots) names no event: it is
	// one with no other.
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	return a[0] == b[0] || a[0] == Wildcard || b[0] == Wildcard
}

// halfOfEach reports whether shared words are at least half of the
// constant words of a and of b: a template made mostly of variables is
// not the same message as any other of its shape.
func halfOfEach(shared int, a, b []string) bool {
	return 2*shared >= constants(a) && 2*shared >= constants(b)
}

// A stretch is the part of a template between two of the words it shares
// with another template, as mergeable aligns them.
type stretch struct {
	tokens []string
	fixed  []bool
	// first: the stretch starts the template.
	first bool
}

// holds reports what a stretch holds: a variable, how many constant
// words, a fixed word.
func (s stretch) holds() (wild bool, words int, fixed bool) {
	for i, t := range s.tokens {
		if t == Wildcard {
			wild = true
		} else {
			words++
		}
		fixed = fixed || s.fixed[i]
	}
	return wild, words, fixed
}

// joinable reports whether two stretches at the same place of two
// templates can be one variable of the merged template: neither holds a
// fixed word; new words are on one side only, at most maxSpanWords of
// them, beside a variable (data with a unit, not other words); and they
// do not take the place of a template's first word, which names the event.
func joinable(x, y stretch) bool {
	wx, wordsX, fx := x.holds()
	wy, wordsY, fy := y.holds()
	switch words := wordsX + wordsY; {
	case fx || fy, wordsX > 0 && wordsY > 0, words > maxSpanWords:
		return false
	case words == 0:
		return true
	case !wx && !wy:
		return false
	}
	return !x.takesFirstWord() && !y.takesFirstWord()
}

// takesFirstWord reports whether the stretch holds its template's first
// word.
func (s stretch) takesFirstWord() bool {
	return s.first && len(s.tokens) > 0 && s.tokens[0] != Wildcard
}

// lcs returns the index pairs of a longest common subsequence of the
// constant words of a and b.
func lcs(a, b []string) [][2]int {
	n, m := len(a), len(b)
	var buf [64 * 64]int16
	var d []int16
	if (n+1)*(m+1) <= len(buf) {
		d = buf[:(n+1)*(m+1)]
	} else {
		d = make([]int16, (n+1)*(m+1))
	}
	w := m + 1
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j] && a[i] != Wildcard:
				d[i*w+j] = d[(i+1)*w+j+1] + 1
			case d[(i+1)*w+j] >= d[i*w+j+1]:
				d[i*w+j] = d[(i+1)*w+j]
			default:
				d[i*w+j] = d[i*w+j+1]
			}
		}
	}
	var pairs [][2]int
	for i, j := 0, 0; i < n && j < m; {
		switch {
		case a[i] == b[j] && a[i] != Wildcard:
			pairs = append(pairs, [2]int{i, j})
			i++
			j++
		case d[(i+1)*w+j] >= d[i*w+j+1]:
			i++
		default:
			j++
		}
	}
	return pairs
}

// spanMatch reports whether toks fits a span template: its constants in
// order, each of its variables taking any number of tokens that may vary,
// at most maxSpanWords of them constant words.
func spanMatch(t []string, tf []bool, toks []token, depth int) bool {
	return spanFit(t, toks, 0, 0, depth, nil)
}

// spanFit reports whether toks[j:] fits the span template t[i:], as
// spanMatch does. When took is not nil (len(t) long), took[p] is set to the
// tokens the variable at position p took, toks[took[p][0]:took[p][1]], so
// that a caller can read a message's values (Template.Values); the miner
// passes nil.
func spanFit(t []string, toks []token, i, j, depth int, took [][2]int) bool {
	if i == len(t) {
		return j == len(toks)
	}
	if t[i] != Wildcard {
		return j < len(toks) && toks[j].text == t[i] && spanFit(t, toks, i+1, j+1, depth, took)
	}
	if depth > 16 {
		return false
	}
	words := 0
	for k := j; ; k++ {
		if took != nil {
			took[i] = [2]int{j, k}
		}
		if spanFit(t, toks, i+1, k, depth+1, took) {
			return true
		}
		if k == len(toks) || toks[k].fixed {
			return false
		}
		if toks[k].text != Wildcard {
			if words++; words > maxSpanWords {
				return false
			}
		}
	}
}

// coversSpan reports whether every message of o fits span cluster c.
func coversSpan(c, o *cluster) bool {
	toks := make([]token, len(o.tokens))
	for i, t := range o.tokens {
		toks[i] = token{text: t, fixed: o.fixed[i], data: t == Wildcard}
	}
	return spanMatch(c.tokens, c.fixed, toks, 0)
}
