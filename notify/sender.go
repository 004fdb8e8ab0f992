// Package notify tells the team when something breaks: it posts
// notification events (a new error group, a spiking one, a bulk operation
// that ended) to webhooks. Events are written to an outbox table in the
// same transaction as what they report; the sender delivers them at least
// once, with retries and backoff up to a cap, one sender at a time across
// console instances. New error groups are announced in digests, at most
// one message per webhook per NewGroupWindow, so that an outage is one
// message rather than one per group. Nothing here runs in a worker, so a
// slow or failing webhook never slows a job.
package notify

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/mask"
	"github.com/redrive/redrive/store/groups"
	"github.com/redrive/redrive/store/operations"
	"github.com/redrive/redrive/store/outbox"
	"github.com/redrive/redrive/store/queue"
)

// Defaults for Config.
const (
	DefaultInterval      = 2 * time.Second
	DefaultSpikeInterval = 30 * time.Second
	DefaultMaxAttempts   = 8
	DefaultBackoffBase   = 10 * time.Second
	DefaultBackoffCap    = 30 * time.Minute
	DefaultRetain        = 7 * 24 * time.Hour
	DefaultTimeout       = 10 * time.Second
	// DefaultSpikeThreshold letters within DefaultSpikeWindow make a spike.
	DefaultSpikeThreshold = 50
	DefaultSpikeWindow    = 5 * time.Minute
	// DefaultSpikeQuiet is how long before a group's spike is announced again.
	DefaultSpikeQuiet = time.Hour
	// DefaultNewGroupWindow is how often at most new groups are announced
	// to one webhook.
	DefaultNewGroupWindow = time.Minute
	// DefaultNewGroupGather is how long a new group waits for the others
	// of its burst before they are announced together.
	DefaultNewGroupGather = 30 * time.Second
	deliverBatch          = 20
	fanOutBatch           = 500
)

// Config configures a Sender. The stores, Holder and PublicURL are
// required.
type Config struct {
	// Outbox holds the events to deliver and their attempts.
	Outbox *outbox.Store
	// Groups, Operations and Pauses are read for what an event is about
	// (and Groups for the incidents, so that one is announced once).
	Groups     *groups.Store
	Operations *operations.Store
	Pauses     *queue.Store
	// Endpoints are the webhooks; with none, events are marked handled and
	// nothing is sent.
	Endpoints []Endpoint
	// Masker masks error text in messages as the console's pages do.
	Masker mask.Policy
	// PublicURL is the console's address as the team opens it, for links.
	PublicURL string
	// Holder names this instance for the sender's lease.
	Holder string
	Logger *slog.Logger
	// Client posts the webhooks; default: a client with DefaultTimeout.
	Client *http.Client
	// Interval is how often the sender looks for work.
	Interval time.Duration
	// SpikeInterval is how often it looks for spiking groups.
	SpikeInterval time.Duration
	Spike         dlq.Spike
	// MaxAttempts caps the attempts at one delivery; then it is given up
	// and shown as failed on the admin page.
	MaxAttempts int
	// BackoffBase and BackoffCap bound the wait between attempts: a random
	// wait between half and all of BackoffBase·2^(attempt-1), at most
	// BackoffCap.
	BackoffBase, BackoffCap time.Duration
	// Retain is how long settled events are kept.
	Retain time.Duration
	// NewGroupWindow is how often at most a webhook is told about new
	// error groups: the first is announced at once, and those found within
	// the window after are listed together in one message when it ends.
	NewGroupWindow time.Duration
	// NewGroupGather is how long the first new group of a burst waits
	// for the rest before their message goes out: an outage that hits
	// two tasks makes two groups seconds apart, announced in one message.
	NewGroupGather time.Duration
}

// Sender delivers notification events. Create one with New; Run it.
type Sender struct {
	cfg       Config
	endpoints map[string]Endpoint // by hash
	log       *slog.Logger
	// afterPass, set by tests only, is told of each pass made under the
	// lease: a test waits for passes instead of sleeping to show that
	// nothing more is sent.
	afterPass func()
}

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Sender, error) {
	if cfg.Outbox == nil || cfg.Groups == nil || cfg.Operations == nil || cfg.Pauses == nil || cfg.Holder == "" {
		return nil, errors.New("notify: the stores and Holder are required")
	}
	if len(cfg.Endpoints) > 0 && cfg.PublicURL == "" {
		return nil, errors.New("notify: PublicURL is required to link notifications to the console (REDRIVE_PUBLIC_URL)")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: DefaultTimeout}
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.SpikeInterval = cmp.Or(cfg.SpikeInterval, DefaultSpikeInterval)
	cfg.Spike.Threshold = cmp.Or(cfg.Spike.Threshold, DefaultSpikeThreshold)
	cfg.Spike.Window = cmp.Or(cfg.Spike.Window, DefaultSpikeWindow)
	cfg.Spike.Quiet = cmp.Or(cfg.Spike.Quiet, DefaultSpikeQuiet)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, DefaultBackoffBase)
	cfg.BackoffCap = cmp.Or(cfg.BackoffCap, DefaultBackoffCap)
	cfg.Retain = cmp.Or(cfg.Retain, DefaultRetain)
	cfg.NewGroupWindow = cmp.Or(cfg.NewGroupWindow, DefaultNewGroupWindow)
	cfg.NewGroupGather = cmp.Or(cfg.NewGroupGather, DefaultNewGroupGather)
	s := &Sender{cfg: cfg, endpoints: map[string]Endpoint{}, log: cfg.Logger.With("component", "notify")}
	for _, e := range cfg.Endpoints {
		s.endpoints[e.Hash()] = e
	}
	return s, nil
}

// Run sends until ctx ends. It holds the sender's lease while it works and
// gives it up on the way out; while another instance holds it, it waits.
// Failures are logged and retried at the next tick, never returned: a
// notification must not take the console down.
func (s *Sender) Run(ctx context.Context) error {
	lease := max(15*time.Second, 3*s.cfg.Interval)
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	var last lastChores
	held := false
	defer func() {
		if held {
			s.releaseLease(ctx)
		}
	}()
	for {
		ok, err := s.cfg.Outbox.AcquireNotificationSender(ctx, s.cfg.Holder, lease)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("notification lease", "err", err)
			}
		case ok:
			held = true
			s.work(ctx, &last)
		default:
			held = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// lastChores is when the lease holder last did what it does less often
// than every tick.
type lastChores struct {
	spikes, prune time.Time
}

// work is one tick of the lease holder: look for spiking groups every
// SpikeInterval (only when some endpoint would hear of them), make a
// pass, and prune old notifications hourly. Failures are logged: the next
// tick tries again.
func (s *Sender) work(ctx context.Context, last *lastChores) {
	if time.Since(last.spikes) >= s.cfg.SpikeInterval && len(s.endpoints) > 0 {
		last.spikes = time.Now()
		if n, err := s.cfg.Outbox.DetectSpikes(ctx, s.cfg.Spike); err != nil {
			s.log.Warn("detect spiking groups", "err", err)
		} else if n > 0 {
			s.log.Info("error groups spiking", "groups", n)
		}
	}
	s.pass(ctx)
	if s.afterPass != nil {
		s.afterPass()
	}
	if time.Since(last.prune) >= time.Hour {
		last.prune = time.Now()
		if _, err := s.cfg.Outbox.PruneNotifications(ctx, s.cfg.Retain); err != nil {
			s.log.Warn("prune notifications", "err", err)
		}
	}
}

// releaseLease gives the sender's lease up on the way out, so that
// another instance takes over at once rather than when the lease runs
// out. It runs after ctx has ended, so it has a short time of its own.
func (s *Sender) releaseLease(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.cfg.Outbox.ReleaseNotificationSender(ctx, s.cfg.Holder); err != nil {
		s.log.Warn("giving up the notification lease failed; another instance takes over when it runs out", "err", err)
	}
}

// pass fans out new events, seals the new groups' digests, and makes the
// deliveries that are due: the digests, then the other events one by one.
func (s *Sender) pass(ctx context.Context) {
	eps := make([]dlq.NotificationEndpoint, 0, len(s.endpoints))
	for _, e := range s.cfg.Endpoints {
		eps = append(eps, dlq.NotificationEndpoint{Hash: e.Hash(), Redacted: e.Redacted()})
	}
	for {
		n, err := s.cfg.Outbox.FanOutNotifications(ctx, eps, fanOutBatch)
		if err != nil {
			s.log.Warn("fan out notifications", "err", err)
			return
		}
		if n < fanOutBatch {
			break
		}
	}
	// A new group that joins an incident announced already is no news.
	s.skipIncidentRepeats(ctx)
	// Sealing before the digests are read: a digest sealed now goes out in
	// this pass. A failure leaves the new groups pending for the next pass.
	if r, err := s.cfg.Outbox.SealNewGroupDigests(ctx, dlq.DigestTiming{Window: s.cfg.NewGroupWindow, Gather: s.cfg.NewGroupGather}); err != nil {
		s.log.Warn("seal new-group digests", "err", err)
	} else if r.Skipped > 0 {
		s.log.Info("new groups merged away before they were announced", "deliveries", r.Skipped)
	}
	digests, err := s.cfg.Outbox.DueDigests(ctx, deliverBatch)
	if err != nil {
		s.log.Warn("due new-group digests", "err", err)
		return
	}
	for _, g := range digests {
		if ctx.Err() != nil {
			return
		}
		s.attempt(ctx, delivery{id: g.ID, kind: digestKind(g), groups: len(g.Events), endpointHash: g.EndpointHash,
			endpoint: g.Endpoint, attempts: g.Attempts,
			compose: func(ctx context.Context) (Message, error) { return s.composeDigest(ctx, g) },
			record:  s.cfg.Outbox.RecordDigestAttempt})
	}
	due, err := s.cfg.Outbox.DueNotifications(ctx, deliverBatch)
	if err != nil {
		s.log.Warn("due notifications", "err", err)
		return
	}
	for _, d := range due {
		if ctx.Err() != nil {
			return
		}
		s.attempt(ctx, delivery{id: d.ID, kind: d.Kind, endpointHash: d.EndpointHash, endpoint: d.Endpoint, attempts: d.Attempts,
			compose: func(ctx context.Context) (Message, error) { return s.compose(ctx, d.NotificationEvent) },
			record:  s.cfg.Outbox.RecordDeliveryAttempt})
	}
}

// delivery is one message to make to one endpoint: an event's, or a
// digest's of new groups.
type delivery struct {
	// id is the event's, or the digest's (its first event's).
	id   int64
	kind string
	// groups is how many new groups a digest lists; 0 for an event.
	groups       int
	endpointHash string
	endpoint     string // redacted
	attempts     int
	// compose makes the message afresh at each attempt, from what the
	// database holds: a digest's groups are fixed when it is sealed, so
	// every attempt posts the same ones under the same id.
	compose func(context.Context) (Message, error)
	// record stores what an attempt came to.
	record func(context.Context, dlq.DeliveryAttempt) error
}

// attempt makes one attempt at d and records what came of it.
func (s *Sender) attempt(ctx context.Context, d delivery) {
	a := dlq.DeliveryAttempt{EventID: d.id, EndpointHash: d.endpointHash}
	ep, ok := s.endpoints[d.endpointHash]
	if !ok {
		a.Error = "the endpoint is no longer configured (REDRIVE_NOTIFY_WEBHOOK_URLS)"
	} else if status, err := s.post(ctx, ep, d.compose); err != nil {
		a.Status, a.Error = status, err.Error()
		if d.attempts+1 < s.cfg.MaxAttempts {
			a.RetryAt = time.Now().Add(s.backoff(d.attempts + 1))
		}
	} else {
		a.Status, a.Delivered = status, true
	}
	if ctx.Err() != nil && !a.Delivered {
		return // cut short by shutdown: not the endpoint's fault; try again later
	}
	// A crash or a lost lease from here until the record is stored leaves
	// the delivery pending: it is posted again, the same message under the
	// same id (at least once; the receiver deduplicates on id).
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := d.record(rctx, a); err != nil {
		s.log.Warn("record notification delivery", "event", d.id, "err", err)
		return
	}
	attrs := []any{"event", d.id, "kind", d.kind, "endpoint", d.endpoint}
	if d.groups > 0 {
		attrs = append(attrs, "groups", d.groups)
	}
	switch {
	case a.Delivered:
		s.log.Info("notification delivered", attrs...)
	case a.RetryAt.IsZero():
		s.log.Error("notification given up", append(attrs, "attempts", d.attempts+1, "err", a.Error)...)
	default:
		s.log.Warn("notification not delivered; retrying", append(attrs, "attempt", d.attempts+1,
			"retry_at", a.RetryAt.UTC().Format(time.RFC3339), "err", a.Error)...)
	}
}

// post sends the message compose makes to ep and returns the HTTP status.
func (s *Sender) post(ctx context.Context, ep Endpoint, compose func(context.Context) (Message, error)) (int, error) {
	m, err := compose(ctx)
	if err != nil {
		return 0, fmt.Errorf("compose: %w", err)
	}
	b, err := body(ep.Format, m)
	if err != nil {
		return 0, fmt.Errorf("encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "redrive-notify")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		// The URL is a secret, and the client's error quotes it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return 0, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("answered %s: %s", resp.Status, bytes.TrimSpace(snippet))
	}
	return resp.StatusCode, nil
}

// skipIncidentRepeats settles the new groups waiting for a digest that
// are the same failure as a group of another task announced already. The
// incidents are read only when a new group waits; a failure leaves them
// to be announced as usual.
func (s *Sender) skipIncidentRepeats(ctx context.Context) {
	waiting, err := s.cfg.Outbox.HasUnsealedNewGroups(ctx)
	if err != nil || !waiting {
		return
	}
	incidents, err := s.cfg.Groups.Incidents(ctx)
	if err != nil {
		s.log.Warn("read incidents for new-group notifications", "err", err)
		return
	}
	if n, err := s.cfg.Outbox.SkipIncidentRepeats(ctx, incidents); err != nil {
		s.log.Warn("skip new groups of incidents announced already", "err", err)
	} else if n > 0 {
		s.log.Info("new groups of incidents announced already were not announced again", "deliveries", n)
	}
}

// backoff is the wait before attempt n+1: exponential, capped, and
// jittered so that many failed deliveries do not retry in step.
func (s *Sender) backoff(n int) time.Duration {
	ceiling := s.cfg.BackoffBase << min(n-1, 30)
	if ceiling <= 0 || ceiling > s.cfg.BackoffCap {
		ceiling = s.cfg.BackoffCap
	}
	return ceiling/2 + rand.N(ceiling/2+1)
}
