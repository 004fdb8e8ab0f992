package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// Format is the shape of a webhook's body.
type Format string

const (
	// FormatJSON is Redrive's own body: a Message as JSON.
	FormatJSON Format = "json"
	// FormatSlack is a Slack incoming-webhook body ({"text": ...}), which
	// Mattermost, Rocket.Chat and Teams' Slack-compatible hooks accept too.
	FormatSlack Format = "slack"
)

// Endpoint is one webhook to notify.
type Endpoint struct {
	URL    string
	Format Format
}

// ParseEndpoints reads REDRIVE_NOTIFY_WEBHOOK_URLS: URLs separated by
// commas or white space, each optionally prefixed with its format
// ("slack:https://…", "json:https://…"). Without a prefix a URL on
// hooks.slack.com is Slack's; any other gets the JSON body.
func ParseEndpoints(list string) ([]Endpoint, error) {
	var eps []Endpoint
	seen := map[string]bool{}
	for _, item := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		ep := Endpoint{URL: item}
		for _, f := range []Format{FormatSlack, FormatJSON} {
			if rest, ok := strings.CutPrefix(item, string(f)+":"); ok && !strings.HasPrefix(rest, "//") {
				ep = Endpoint{URL: rest, Format: f}
			}
		}
		u, err := url.Parse(ep.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("webhook %q: want an http or https URL, optionally prefixed with \"slack:\" or \"json:\"", redact(ep.URL))
		}
		if ep.Format == "" {
			ep.Format = FormatJSON
			if u.Hostname() == "hooks.slack.com" {
				ep.Format = FormatSlack
			}
		}
		if seen[ep.URL] {
			continue
		}
		seen[ep.URL] = true
		eps = append(eps, ep)
	}
	return eps, nil
}

// Hash names the endpoint in the database without its URL, which is a
// secret: an incoming-webhook URL carries its token.
func (e Endpoint) Hash() string {
	sum := sha256.Sum256([]byte(e.URL))
	return hex.EncodeToString(sum[:16])
}

// Redacted is the endpoint as the admin page and the logs show it: its
// format, its URL's scheme, host and first path segment, and a short hash
// of the whole URL to tell apart two endpoints on one host. Nothing of the
// URL's secret shows, not even its last characters: incoming-webhook URLs
// carry their token in the path (Slack's /services/T…/B…/token, Discord's
// /api/webhooks/id/token) or the query, and who holds the userinfo holds
// the endpoint.
func (e Endpoint) Redacted() string {
	return string(e.Format) + " " + redact(e.URL) + " (#" + e.Hash()[:6] + ")"
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparsable URL)"
	}
	shown := u.Scheme + "://" + u.Host
	path := strings.TrimPrefix(u.EscapedPath(), "/")
	first, rest, more := strings.Cut(path, "/")
	if first != "" {
		shown += "/" + first
	}
	if more && rest != "" || u.RawQuery != "" || u.Fragment != "" {
		shown += "/…"
	}
	return shown
}
