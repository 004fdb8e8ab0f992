package grouping_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/redrive/redrive/grouping"
)

// TestLoghubAccuracy measures grouping accuracy on Loghub's labelled
// 2,000-message samples (github.com/logpai/logparser, data/loghub_2k_corrected),
// when REDRIVE_LOGHUB_DIR names a folder holding their
// *_structured_corrected.csv files. The data is not in this repository.
// Each message is fed in order as a letter's message, with an empty task,
// class and traceback, and the groups are read after the last message.
func TestLoghubAccuracy(t *testing.T) {
	dir := os.Getenv("REDRIVE_LOGHUB_DIR")
	if dir == "" {
		t.Skip("REDRIVE_LOGHUB_DIR is not set")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*_structured_corrected.csv"))
	sort.Strings(files)
	sum, worst := 0.0, 1.0
	for _, f := range files {
		rows := readLoghub(t, f)
		g := grouping.New(nil)
		truth, got := make([]string, len(rows)), make([]string, len(rows))
		for i, r := range rows {
			id, err := g.Group(context.Background(), grouping.Letter{Message: r[0]})
			if err != nil {
				t.Fatal(err)
			}
			truth[i], got[i] = r[1], id
		}
		got = g.Resolve(got)
		acc := accuracy(truth, got)
		sum += acc
		worst = min(worst, acc)
		name := strings.SplitN(filepath.Base(f), "_", 2)[0]
		t.Logf("%-12s %.3f", name, acc)
		if os.Getenv("REDRIVE_LOGHUB_SHOW") == name {
			showErrors(t, rows, truth, got)
		}
	}
	t.Logf("average %.3f, worst %.3f", sum/float64(len(files)), worst)
}

func readLoghub(t *testing.T, path string) [][2]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := recs[0]
	col := func(name string) int {
		for i, h := range head {
			if h == name {
				return i
			}
		}
		t.Fatalf("%s: no column %s", path, name)
		return -1
	}
	content, template := col("Content"), col("EventTemplate")
	var rows [][2]string
	for _, r := range recs[1:] {
		rows = append(rows, [2]string{r[content], r[template]})
	}
	return rows
}

// accuracy is Loghub's grouping accuracy: the share of messages whose
// predicted group holds exactly the messages of their true group.
func accuracy(truth, got []string) float64 {
	byTruth, byGot := map[string][]int{}, map[string][]int{}
	for i := range truth {
		byTruth[truth[i]] = append(byTruth[truth[i]], i)
		byGot[got[i]] = append(byGot[got[i]], i)
	}
	right := 0
	for _, members := range byGot {
		tr := truth[members[0]]
		if len(byTruth[tr]) != len(members) {
			continue
		}
		ok := true
		for _, i := range members {
			if truth[i] != tr {
				ok = false
				break
			}
		}
		if ok {
			right += len(members)
		}
	}
	return float64(right) / float64(len(truth))
}

func showErrors(t *testing.T, rows [][2]string, truth, got []string) {
	byTruth, byGot := map[string][]int{}, map[string][]int{}
	for i := range truth {
		byTruth[truth[i]] = append(byTruth[truth[i]], i)
		byGot[got[i]] = append(byGot[got[i]], i)
	}
	for tr, members := range byTruth {
		groups := map[string]int{}
		for _, i := range members {
			groups[got[i]]++
		}
		if len(groups) > 1 {
			t.Logf("SPLIT %q into %d groups, e.g.:", tr, len(groups))
			seen := map[string]bool{}
			for _, i := range members {
				if !seen[got[i]] && len(seen) < 4 {
					seen[got[i]] = true
					t.Logf("    %s", rows[i][0])
				}
			}
		}
	}
	for g, members := range byGot {
		trs := map[string]bool{}
		for _, i := range members {
			trs[truth[i]] = true
		}
		if len(trs) > 1 {
			t.Logf("MERGED %d templates in %s:", len(trs), g)
			n := 0
			for tr := range trs {
				if n < 5 {
					t.Logf("    %s", tr)
				}
				n++
			}
		}
	}
}
