package grouping_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// The labelled corpus of dead letters (testdata/deadjobs.jsonl, see
// testdata/README.md) and the measure a grouper is judged by on it. These are
// helpers: the test that runs the grouper over the corpus lives with the
// grouper.

// corpusPath is the corpus, relative to this package's directory (where go
// test runs).
const corpusPath = "testdata/deadjobs.jsonl"

// corpusLetter is one line of the corpus: a dead letter as the grouper sees
// it, and Failure, its true label. Letters with one label are one failure
// (one bug or one incident); the grouper should put them in one group and
// nothing else with them.
type corpusLetter struct {
	Failure   string `json:"failure"`
	Task      string `json:"task"`
	Class     string `json:"class"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// loadCorpus reads a corpus of JSON lines, one corpusLetter a line, in the
// file's order (the order the letters arrived in, which an online grouper
// must see them in). It fails the test on a file it cannot read, a line
// that is not a letter, or a letter without a label, task or class.
func loadCorpus(t testing.TB, path string) []corpusLetter {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	defer f.Close()
	var letters []corpusLetter
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024) // a letter with a long traceback
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var l corpusLetter
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		if l.Failure == "" || l.Task == "" || l.Class == "" {
			t.Fatalf("%s:%d: a letter needs a failure, a task and a class", path, n)
		}
		letters = append(letters, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return letters
}

// groupingAccuracy is the grouping accuracy (GA) of the log-parsing
// benchmarks (Zhu et al., "Tools and Benchmarks for Automated Log Parsing",
// ICSE-SEIP 2019; Loghub): the share of letters grouped exactly right. Letter
// i is right when the letters that share its predicted group
// (predicted[j] == predicted[i]) are exactly the letters that share its true
// label (truth[j] == truth[i]): a group that mixes two failures makes all its
// letters wrong, and so does a failure split into several groups, even the
// biggest part. The names of groups and labels do not matter, only which
// letters go together. truth and predicted are indexed by letter and must
// have the same length; with no letters the accuracy is 0.
func groupingAccuracy(truth, predicted []string) float64 {
	if len(truth) != len(predicted) {
		panic(fmt.Sprintf("groupingAccuracy: %d true labels, %d predicted", len(truth), len(predicted)))
	}
	if len(truth) == 0 {
		return 0
	}
	failureSize := map[string]int{}
	for _, label := range truth {
		failureSize[label]++
	}
	// A predicted group is exactly one failure when all its letters have
	// that failure's label and it holds as many letters as the failure has.
	type group struct {
		label string // the true label of its first letter
		size  int
		mixed bool // some letter has another label
	}
	groups := map[string]*group{}
	for i, p := range predicted {
		g := groups[p]
		if g == nil {
			g = &group{label: truth[i]}
			groups[p] = g
		}
		g.size++
		g.mixed = g.mixed || truth[i] != g.label
	}
	right := 0
	for _, g := range groups {
		if !g.mixed && g.size == failureSize[g.label] {
			right += g.size
		}
	}
	return float64(right) / float64(len(truth))
}

func TestGroupingAccuracy(t *testing.T) {
	truth := []string{"a", "a", "a", "b", "b", "c"}
	for _, tc := range []struct {
		name      string
		predicted []string
		want      float64
	}{
		// Group names are arbitrary: only the partition counts.
		{"Perfect", []string{"g1", "g1", "g1", "g2", "g2", "g3"}, 1},
		{"PerfectWithTheLabelsAsNames", []string{"b", "b", "b", "c", "c", "a"}, 1},
		// Failure a split 2+1: its three letters are wrong, b and c right.
		{"OneSplit", []string{"g1", "g1", "g4", "g2", "g2", "g3"}, 3.0 / 6},
		// Failures b and c merged: their three letters are wrong, a right.
		{"OneMerge", []string{"g1", "g1", "g1", "g2", "g2", "g2"}, 3.0 / 6},
		// A split and a merge at once: a's odd letter joins c.
		{"SplitIntoAMerge", []string{"g1", "g1", "g3", "g2", "g2", "g3"}, 2.0 / 6},
		{"AllInOneGroup", []string{"g", "g", "g", "g", "g", "g"}, 0},
		// Only c, a singleton failure, is right when every letter is alone.
		{"EveryLetterAlone", []string{"1", "2", "3", "4", "5", "6"}, 1.0 / 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := groupingAccuracy(truth, tc.predicted); got != tc.want {
				t.Errorf("groupingAccuracy(%v, %v) = %v, want %v", truth, tc.predicted, got, tc.want)
			}
		})
	}
	t.Run("NoLetters", func(t *testing.T) {
		if got := groupingAccuracy(nil, nil); got != 0 {
			t.Errorf("groupingAccuracy(nil, nil) = %v, want 0", got)
		}
	})
	t.Run("LengthsDiffer", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("no panic for 2 labels and 1 prediction")
			}
		}()
		groupingAccuracy([]string{"a", "a"}, []string{"g"})
	})
}

// TestCorpusLoads reads the corpus with loadCorpus and checks what the
// accuracy test relies on: its size, and that each label is one task's (a
// failure is one task's; the same error in another task is another
// failure).
func TestCorpusLoads(t *testing.T) {
	letters := loadCorpus(t, corpusPath)
	taskOf := map[string]string{}
	for i, l := range letters {
		if task, ok := taskOf[l.Failure]; ok && task != l.Task {
			t.Errorf("letter %d: failure %s in task %s and in task %s", i+1, l.Failure, task, l.Task)
		}
		taskOf[l.Failure] = l.Task
	}
	if len(letters) < 600 || len(taskOf) < 45 {
		t.Errorf("the corpus has %d letters of %d failures, want at least 600 of 45", len(letters), len(taskOf))
	}
}
