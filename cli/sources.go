package cli

import (
	"strings"

	"github.com/redrive/redrive/dlq"
)

// parseSources reads --sources: NAME=KIND pairs, comma-separated (an empty
// list is none). A name is given once, and never as redrive, the console's
// own queue, which is always a source.
func parseSources(s string) ([]dlq.Source, error) {
	var out []dlq.Source
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rawKind, ok := strings.Cut(part, "=")
		name, kind := strings.TrimSpace(name), dlq.SourceKind(strings.TrimSpace(rawKind))
		switch {
		case !ok:
			return nil, usagef("--sources: %q is not NAME=KIND (for example legacy-billing=http)", part)
		case dlq.SourceNameProblem(name) != "":
			return nil, usagef("--sources: the name %q %s", name, dlq.SourceNameProblem(name))
		case name == dlq.RedriveSource:
			return nil, usagef("--sources: %s is the console's own queue, always a source; name the other systems", name)
		case !kind.Valid():
			return nil, usagef("--sources: %s's kind %q is not one Redrive knows: http (the system POSTs its letters to /api/v1/letters)", name, kind)
		case seen[name]:
			return nil, usagef("--sources: %s is named twice", name)
		}
		seen[name] = true
		out = append(out, dlq.Source{Name: name, Kind: kind})
	}
	return out, nil
}
