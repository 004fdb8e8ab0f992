package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/replayhook"
	"github.com/redrive/redrive/riversource"
	"github.com/redrive/redrive/store/sources"
)

// SourceConfig is one source the operator configured (--sources).
type SourceConfig struct {
	dlq.Source
	// DatabaseURL is where a River source's tables are: the URL after
	// river:, or else the console's own database.
	DatabaseURL string
	// ReplaySecret signs the replays posted to an HTTP source's replay
	// endpoint (Source.ReplayURL), from --replay-secrets.
	ReplaySecret []byte
}

// parseSources reads --sources: NAME=KIND pairs, comma-separated (an empty
// list is none); a River source may name its database, NAME=river:URL,
// and otherwise is in ownDB; an HTTP source may name its replay endpoint,
// NAME=http:URL, whose key is in secrets (--replay-secrets, NAME=SECRET
// pairs). A name is given once, and never as redrive, the console's own
// queue, which is always a source.
func parseSources(s, ownDB, secrets string) ([]SourceConfig, error) {
	srcs, err := parseSourceList(s, ownDB)
	if err != nil {
		return nil, err
	}
	keys, err := parseReplaySecrets(secrets)
	if err != nil {
		return nil, err
	}
	for i, src := range srcs {
		key, ok := keys[src.Name]
		delete(keys, src.Name)
		switch {
		case src.ReplayURL != nil && !ok:
			return nil, usagef("--replay-secrets: %s posts its replays to an endpoint, which needs a secret to check them by: add %s=$(openssl rand -hex 32)", src.Name, src.Name)
		case src.ReplayURL == nil && ok:
			return nil, usagef("--replay-secrets: %s names no replay endpoint (--sources %s=http:https://...), so nothing is signed with its secret", src.Name, src.Name)
		}
		srcs[i].ReplaySecret = key
	}
	for name := range keys {
		return nil, usagef("--replay-secrets: %s is not a source named in --sources", name)
	}
	return srcs, nil
}

// parseReplaySecrets reads --replay-secrets: NAME=SECRET pairs.
func parseReplaySecrets(s string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, secret, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok:
			return nil, usagef("--replay-secrets: an entry is not NAME=SECRET (the secret is not shown)")
		case len(secret) < replayhook.MinSecretLen:
			return nil, usagef("--replay-secrets: %s's secret has %d bytes; use at least %d (openssl rand -hex 32)", name, len(secret), replayhook.MinSecretLen)
		case out[name] != nil:
			return nil, usagef("--replay-secrets: %s is named twice", name)
		}
		out[name] = []byte(secret)
	}
	return out, nil
}

func parseSourceList(s, ownDB string) ([]SourceConfig, error) {
	var out []SourceConfig
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rawKind, ok := strings.Cut(part, "=")
		rawKind, dbURL, hasURL := strings.Cut(rawKind, ":")
		name, kind := strings.TrimSpace(name), dlq.SourceKind(strings.TrimSpace(rawKind))
		switch {
		case !ok:
			return nil, usagef("--sources: %q is not NAME=KIND (for example legacy-billing=http, orders=river)", part)
		case dlq.SourceNameProblem(name) != "":
			return nil, usagef("--sources: the name %q %s", name, dlq.SourceNameProblem(name))
		case name == dlq.RedriveSource:
			return nil, usagef("--sources: %s is the console's own queue, always a source; name the other systems", name)
		case !kind.Valid():
			return nil, usagef("--sources: %s's kind %q is not one Redrive knows: http (the system POSTs its letters to /api/v1/letters), river (Redrive imports the jobs River discarded) or celery (a Celery app with redrive-celery)", name, kind)

		case seen[name]:
			return nil, usagef("--sources: %s is named twice", name)
		}
		seen[name] = true
		src := SourceConfig{Source: dlq.Source{Name: name, Kind: kind}}
		switch {
		case kind == dlq.SourceKindRiver && hasURL:
			if u, err := url.Parse(dbURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				return nil, usagef("--sources: %s: %q is not a postgres:// URL", name, redactURL(dbURL))
			}
			src.DatabaseURL = dbURL
		case kind == dlq.SourceKindRiver:
			src.DatabaseURL = ownDB
		case hasURL: // http: the replay endpoint
			if u, err := url.Parse(dbURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, usagef("--sources: %s: %q is not an http(s):// URL of its replay endpoint", name, redactURL(dbURL))
			}
			src.ReplayURL = &dbURL
		}
		out = append(out, src)
	}
	return out, nil
}

// redactURL hides a URL's password, for a message.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return u.Redacted()
}

// riverSources connects to each River source's database and returns the
// sources, and a func that closes their connections.
func riverSources(ctx context.Context, cfg ConsoleConfig, store *sources.Store) ([]*riversource.Source, func(), error) {
	var rivers []*riversource.Source
	var pools []*pgxpool.Pool
	closeAll := func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, src := range cfg.Sources {
		if src.Kind != dlq.SourceKindRiver {
			continue
		}
		pool, err := pgxpool.New(ctx, src.DatabaseURL)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("river source %s: %s: %w", src.Name, redactURL(src.DatabaseURL), err)
		}
		pools = append(pools, pool)
		r, err := riversource.New(riversource.Config{Source: src.Name, Pool: pool, Store: store, Logger: cfg.Logger})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		rivers = append(rivers, r)
	}
	return rivers, closeAll, nil
}
