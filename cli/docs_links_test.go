package cli

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module's root, from this package's folder.
const repoRoot = ".."

// readmeMaxLines keeps the README one screen a newcomer reads top to
// bottom; what is looked up later belongs in docs/.
const readmeMaxLines = 300

// TestDocsLinks checks every relative link and image in README.md and
// docs/: the file or folder it names exists inside the repository, and a
// #fragment names a heading of the Markdown file it points to. Links to
// other sites are not followed.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	headings := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := headings[path]; ok {
			return a
		}
		a := map[string]bool{}
		for _, h := range markdownHeadings(t, path) {
			a[h] = true
		}
		headings[path] = a
		return a
	}
	for _, file := range files {
		for _, l := range markdownLinks(t, file) {
			if l.target == "" || hasScheme(l.target) {
				continue
			}
			path, fragment, _ := strings.Cut(l.target, "#")
			target := file
			if path != "" {
				if strings.HasPrefix(path, "/") {
					t.Errorf("%s:%d: %q is absolute; link relative to the file", rel(root, file), l.line, l.target)
					continue
				}
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if r, err := filepath.Rel(root, target); err != nil || r == ".." || strings.HasPrefix(r, "../") {
					t.Errorf("%s:%d: %q leads out of the repository", rel(root, file), l.line, l.target)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: %q: no such file or folder", rel(root, file), l.line, l.target)
					continue
				}
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: %q: an anchor into a file that is not Markdown", rel(root, file), l.line, l.target)
				continue
			}
			if !anchorsOf(target)[fragment] {
				t.Errorf("%s:%d: %q: %s has no heading with the anchor #%s", rel(root, file), l.line, l.target, rel(root, target), fragment)
			}
		}
	}
}

// TestREADMEIsOneScreen keeps the README short (issue 29): the rest is in
// docs/, linked from it.
func TestREADMEIsOneScreen(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move what a reader looks up later into docs/", n, readmeMaxLines)
	}
}

// TestMarkdownAnchors checks anchor against the ids GitHub gives headings
// like the ones docs/ has.
func TestMarkdownAnchors(t *testing.T) {
	t.Parallel()
	for heading, want := range map[string]string{
		"The audit trail's head":             "the-audit-trails-head",
		"The method: `make bench`":           "the-method-make-bench",
		"A walk-through: a poison payload":   "a-walk-through-a-poison-payload",
		"What `redrive dev` changes":         "what-redrive-dev-changes",
		"Following a bulk replay, *at once*": "following-a-bulk-replay-at-once",
		"Links: [the API](api.md) and more":  "links-the-api-and-more",
		"snake_case and CamelCase":           "snake_case-and-camelcase",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// markdownFiles lists README.md and every .md file under docs/ of root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// link is one link or image of a Markdown file.
type link struct {
	target string
	line   int
}

var (
	// inlineLink matches [text](target) and ![alt](target); the target
	// ends at a space (before a title) or the closing parenthesis.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// referenceDef matches a reference definition: [name]: target.
	referenceDef = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	codeSpan     = regexp.MustCompile("`+[^`]*`+")
)

// markdownLinks returns the links of a Markdown file outside code blocks
// and code spans.
func markdownLinks(t *testing.T, path string) []link {
	t.Helper()
	var links []link
	eachProseLine(t, path, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, link{m[1], n})
		}
		if m := referenceDef.FindStringSubmatch(line); m != nil {
			links = append(links, link{m[1], n})
		}
	})
	return links
}

// markdownHeadings returns the anchors of a Markdown file's headings, as
// GitHub makes them: a repeated heading gets -1, -2, ... appended.
func markdownHeadings(t *testing.T, path string) []string {
	t.Helper()
	var anchors []string
	seen := map[string]int{}
	eachProseLine(t, path, func(_ int, line string) {
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		a := anchor(m[1])
		if n := seen[a]; n > 0 {
			anchors = append(anchors, a+"-"+strconv.Itoa(n))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	})
	return anchors
}

var (
	// atxHeading matches a heading line, "# Title" to "###### Title",
	// without its closing hashes.
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	// mdLinkText keeps a link's text and drops its target.
	mdLinkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// notInAnchor is what GitHub drops from a heading: everything but
	// letters, digits, spaces, hyphens and underscores.
	notInAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchor is the id GitHub gives a heading: its text as shown, lower case,
// punctuation dropped, each space a hyphen.
func anchor(heading string) string {
	s := mdLinkText.ReplaceAllString(heading, "$1")
	s = strings.NewReplacer("`", "", "*", "").Replace(s)
	s = notInAnchor.ReplaceAllString(strings.ToLower(strings.TrimSpace(s)), "")
	return strings.ReplaceAll(s, " ", "-")
}

// eachProseLine calls fn with each line of a Markdown file that is not in
// a fenced or indented code block, numbered from 1.
func eachProseLine(t *testing.T, path string, fn func(n int, line string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	fence := ""
	prevBlank := true
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		// An indented code block starts after a blank line (a list item's
		// continuation lines are indented too, but follow text) and runs
		// while its lines stay indented.
		if prevBlank && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) {
			continue
		}
		prevBlank = strings.TrimSpace(line) == ""
		fn(n, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

var scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// hasScheme reports whether a link goes to another site (https:, mailto:).
func hasScheme(target string) bool { return scheme.MatchString(target) }

// rel names a file of the repository for a message.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
