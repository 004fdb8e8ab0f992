package grouping

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func learnAll(m *miner, key string, msgs ...string) []learned {
	out := make([]learned, len(msgs))
	for i, msg := range msgs {
		out[i] = m.learn(key, tokenize(msg))
	}
	return out
}

// A cluster keeps its id when its template widens, and when clusters
// merge the oldest id survives.
func TestClusterIDsStable(t *testing.T) {
	m := newMiner(DefaultThreshold)
	rs := learnAll(m, "k",
		"session opened for user cyrus by uid 0",
		"session opened for user news by uid 0",
		"session opened for user test by uid 509",
	)
	first := rs[0].cluster.id
	last := rs[2]
	if last.cluster.id != first || !last.widened {
		t.Fatalf("after three users: cluster %s widened %v, want the first cluster %s widened", last.cluster.id, last.widened, first)
	}
	if len(last.merged) != 2 || last.merged[0] == first || last.merged[1] == first {
		t.Errorf("merged %v, want the two younger clusters", last.merged)
	}
	if got := last.cluster.template(); got != "session opened for user <*> by uid <*>" {
		t.Errorf("template %q", got)
	}
	// A fourth user joins without a new cluster.
	if r := m.learn("k", tokenize("session opened for user root by uid 0")); r.created || r.cluster.id != first {
		t.Errorf("fourth user: created %v in %s", r.created, r.cluster.id)
	}
}

// Messages of one failure whose variable takes more words merge into a
// span cluster under the oldest id; words against words do not.
func TestSpanClusters(t *testing.T) {
	m := newMiner(DefaultThreshold)
	rs := learnAll(m, "k",
		"proxy.example.com:5070 close, 451 bytes sent, 353 bytes received, lifetime 00:01",
		"proxy.example.com:5070 close, 1190 bytes (1.16 KB) sent, 1671 bytes (1.63 KB) received, lifetime <1 sec",
		"proxy.example.com:5070 close, 1190 bytes (1.16 MB) sent, 12 bytes received, lifetime 02:01",
	)
	if rs[1].cluster.id != rs[0].cluster.id || rs[2].cluster.id != rs[0].cluster.id {
		t.Errorf("one message in %s, %s, %s", rs[0].cluster.id, rs[1].cluster.id, rs[2].cluster.id)
	}
	if !rs[1].cluster.span {
		t.Errorf("%q is not a span cluster", rs[1].cluster.template())
	}
	rs = learnAll(m, "k2",
		"charge for order ORD-1 timed out",
		"charge for order ORD-2 declined by issuer",
		"login failed",
		"login failed for user root",
	)
	if rs[0].cluster.id == rs[1].cluster.id {
		t.Errorf("%q and %q are one cluster", "timed out", "declined by issuer")
	}
	if rs[2].cluster.id == rs[3].cluster.id {
		t.Errorf("%q and %q are one cluster", "login failed", "login failed for user root")
	}
}

// A key whose messages never repeat holds at most maxClusters clusters,
// and a catch-all per length.
func TestClustersBounded(t *testing.T) {
	m := newMiner(DefaultThreshold)
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	for range 3 * maxClusters {
		msg := ""
		for range 3 + r.IntN(4) {
			msg += words[r.IntN(len(words))] + " "
		}
		m.learn("k", tokenize(msg))
	}
	n := 0
	for _, cs := range m.buckets {
		n += len(cs)
	}
	if n > maxClusters+10 {
		t.Errorf("%d clusters, want at most %d and a catch-all per length", n, maxClusters)
	}
}

// BenchmarkLearnNovel is the worst case: every message makes a new
// cluster, compared with the key's others.
func BenchmarkLearnNovel(b *testing.B) {
	m := newMiner(DefaultThreshold)
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	msgs := make([][]token, 4096)
	for i := range msgs {
		msg := ""
		for range 4 + r.IntN(8) {
			msg += words[r.IntN(len(words))] + " "
		}
		msgs[i] = tokenize(msg + fmt.Sprint(i))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.learn(fmt.Sprint(i/maxClusters), msgs[i%len(msgs)])
	}
}
