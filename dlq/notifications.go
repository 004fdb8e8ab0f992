package dlq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lib/pq"
)

// The kinds of notification event. Triggers write the group and operation
// events in the same transaction as what they report (migration 00022);
// DetectSpikes writes the spikes.
const (
	NotifyGroupNew           = "group_new"
	NotifyGroupSpike         = "group_spike"
	NotifyOperationDone      = "operation_done"
	NotifyOperationFailed    = "operation_failed"
	NotifyOperationCancelled = "operation_cancelled"
	NotifyPauseBegan         = "pause_began"
	NotifyPauseExpired       = "pause_expired"
)

// The follow-through of a bulk replay (00026): it waits for a decision.
const (
	NotifyOperationAutoPaused   = "operation_auto_paused"
	NotifyOperationCanaryFailed = "operation_canary_failed"
)

// The states of a delivery.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// NotificationEndpoint is a webhook as the database knows it: a hash of its
// URL, which is a secret (an incoming-webhook URL carries its token), and a
// redacted form to show.
type NotificationEndpoint struct {
	Hash     string
	Redacted string
}

// NotificationEvent is one thing worth telling the team.
type NotificationEvent struct {
	ID      int64           `db:"id"`
	Kind    string          `db:"kind"`
	Subject string          `db:"subject"`
	Facts   json.RawMessage `db:"facts"`
	At      time.Time       `db:"created_at"`
}

// ConsolePath is the console page the event is about: the group's page
// (what broke, since when, its letters, and the buttons to replay it or
// pause its task: where the on-call acts), the operation, or the pauses.
func (e NotificationEvent) ConsolePath() string {
	if strings.HasPrefix(e.Kind, "operation_") {
		return "/operations/" + url.PathEscape(e.Subject)
	}
	if strings.HasPrefix(e.Kind, "pause_") {
		return "/pauses"
	}
	return "/groups/" + url.PathEscape(e.Subject)
}

// NotificationDelivery is one event's delivery to one endpoint.
type NotificationDelivery struct {
	NotificationEvent
	EndpointHash  string     `db:"endpoint_hash"`
	Endpoint      string     `db:"endpoint"`
	State         string     `db:"state"`
	Attempts      int        `db:"attempts"`
	NextAttemptAt time.Time  `db:"next_attempt_at"`
	LastError     string     `db:"last_error"`
	LastStatus    *int       `db:"last_status"`
	DeliveredAt   *time.Time `db:"delivered_at"`
	UpdatedAt     time.Time  `db:"updated_at"`
}

// AcquireNotificationSender takes or renews the sender's lease for holder:
// one console instance sends at a time. It reports whether holder has it.
func (s *Store) AcquireNotificationSender(ctx context.Context, holder string, lease time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE notification_sender
		SET holder = $1, held_until = now() + $2 * interval '1 millisecond'
		WHERE holder = $1 OR held_until < now()`, holder, lease.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("acquire notification sender: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("acquire notification sender: %w", err)
	}
	return n == 1, nil
}

// ReleaseNotificationSender gives the lease up, so another instance sends
// at once rather than after the lease runs out.
func (s *Store) ReleaseNotificationSender(ctx context.Context, holder string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE notification_sender SET held_until = '-infinity' WHERE holder = $1`, holder); err != nil {
		return fmt.Errorf("release notification sender: %w", translate(err))
	}
	return nil
}

// fanOutSQL makes the deliveries of up to $3 events not yet fanned out, one
// per endpoint in $1/$2, and marks the events fanned out, in one statement:
// an event is fanned out once, to the endpoints configured at that moment.
const fanOutSQL = `
WITH ev AS (
	SELECT id FROM notification_events WHERE NOT fanned_out ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED
), made AS (
	INSERT INTO notification_deliveries (event_id, endpoint_hash, endpoint)
	SELECT ev.id, e.hash, e.redacted FROM ev CROSS JOIN unnest($1::text[], $2::text[]) AS e(hash, redacted)
	ON CONFLICT DO NOTHING
)
UPDATE notification_events n SET fanned_out = true FROM ev WHERE n.id = ev.id`

// FanOutNotifications makes the deliveries of up to limit new events, one
// per endpoint, and returns how many events it handled. With no endpoints
// the events are marked handled and nothing is sent.
func (s *Store) FanOutNotifications(ctx context.Context, endpoints []NotificationEndpoint, limit int) (int, error) {
	hashes, redacted := make([]string, len(endpoints)), make([]string, len(endpoints))
	for i, e := range endpoints {
		hashes[i], redacted[i] = e.Hash, e.Redacted
	}
	res, err := s.db.ExecContext(ctx, fanOutSQL, pq.Array(hashes), pq.Array(redacted), limit)
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", err)
	}
	return int(n), nil
}

const deliveryColumns = `e.id, e.kind, e.subject, e.facts, e.created_at, d.endpoint_hash, d.endpoint, d.state,
	d.attempts, d.next_attempt_at, d.last_error, d.last_status, d.delivered_at, d.updated_at`

// DueNotifications returns up to limit pending deliveries whose next attempt
// is due, oldest first.
func (s *Store) DueNotifications(ctx context.Context, limit int) ([]NotificationDelivery, error) {
	var ds []NotificationDelivery
	err := s.db.SelectContext(ctx, &ds, `SELECT `+deliveryColumns+`
		FROM notification_deliveries d JOIN notification_events e ON e.id = d.event_id
		WHERE d.state = 'pending' AND d.next_attempt_at <= now()
		ORDER BY d.next_attempt_at, e.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", translate(err))
	}
	return ds, nil
}

// DeliveryAttempt is what one attempt at a delivery came to.
type DeliveryAttempt struct {
	EventID      int64
	EndpointHash string
	// Delivered: the endpoint answered 2xx.
	Delivered bool
	// Status is the HTTP status, 0 when there was no answer.
	Status int
	// Error says why it was not delivered.
	Error string
	// RetryAt is when to try again; zero gives the delivery up.
	RetryAt time.Time
}

// RecordDeliveryAttempt records an attempt at a pending delivery. A
// delivery already settled (by another sender whose lease ran out while it
// posted) is left as it is.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, a DeliveryAttempt) error {
	state := DeliveryPending
	switch {
	case a.Delivered:
		state = DeliveryDelivered
	case a.RetryAt.IsZero():
		state = DeliveryFailed
	}
	var status *int
	if a.Status != 0 {
		status = &a.Status
	}
	retryAt := a.RetryAt
	if retryAt.IsZero() {
		retryAt = time.Now()
	}
	_, err := s.db.ExecContext(ctx, `UPDATE notification_deliveries SET
		state = $3, attempts = attempts + 1, last_status = $4, last_error = $5, next_attempt_at = $6,
		delivered_at = CASE WHEN $3 = 'delivered' THEN now() END, updated_at = now()
		WHERE event_id = $1 AND endpoint_hash = $2 AND state = 'pending'`,
		a.EventID, a.EndpointHash, state, status, a.Error, retryAt)
	if err != nil {
		return fmt.Errorf("record delivery attempt: %w", translate(err))
	}
	return nil
}

// NotificationDeliveries returns the latest deliveries, those given up
// first, for the admin page.
func (s *Store) NotificationDeliveries(ctx context.Context, limit int) ([]NotificationDelivery, error) {
	var ds []NotificationDelivery
	err := s.db.SelectContext(ctx, &ds, `SELECT `+deliveryColumns+`
		FROM (SELECT * FROM notification_deliveries ORDER BY updated_at DESC LIMIT $1) d
		JOIN notification_events e ON e.id = d.event_id
		ORDER BY d.state = 'failed' DESC, d.updated_at DESC`, limit)
	if err != nil {
		return nil, fmt.Errorf("notification deliveries: %w", translate(err))
	}
	return ds, nil
}

// detectSpikesSQL announces each group with at least $1 letters that
// failed in the last $2 ms, unless it was announced in the last $3 ms. Only
// groups seen within the window are counted, each with one probe of the
// (fingerprint, failed_at) index that stops at $4 letters.
const detectSpikesSQL = `
WITH hot AS (
	SELECT g.fingerprint, g.task, g.error_class, c.n
	FROM error_groups g
	CROSS JOIN LATERAL (
		SELECT count(*) AS n FROM (
			SELECT 1 FROM dead_letters d
			WHERE d.fingerprint = g.fingerprint AND d.failed_at >= now() - $2 * interval '1 millisecond'
			LIMIT $4) x
	) c
	WHERE g.last_seen >= now() - $2 * interval '1 millisecond' AND c.n >= $1
), fresh AS (
	INSERT INTO notification_spikes AS s (fingerprint, notified_at)
	SELECT fingerprint, now() FROM hot
	ON CONFLICT (fingerprint) DO UPDATE SET notified_at = EXCLUDED.notified_at
	WHERE s.notified_at < now() - $3 * interval '1 millisecond'
	RETURNING fingerprint
)
INSERT INTO notification_events (kind, subject, facts)
SELECT 'group_spike', h.fingerprint, jsonb_build_object('task', h.task, 'error_class', h.error_class,
	'count', h.n, 'at_least', h.n >= $4, 'window_seconds', $2 / 1000)
FROM hot h JOIN fresh f USING (fingerprint)`

// Spike is what counts as a group spiking: at least Threshold letters
// within Window. A group is announced again only after Quiet.
type Spike struct {
	Threshold int
	Window    time.Duration
	Quiet     time.Duration
}

// DetectSpikes writes a group_spike event for each group spiking now and
// not announced within sp.Quiet, and returns how many it wrote.
func (s *Store) DetectSpikes(ctx context.Context, sp Spike) (int, error) {
	res, err := s.db.ExecContext(ctx, detectSpikesSQL, sp.Threshold, sp.Window.Milliseconds(), sp.Quiet.Milliseconds(), 10*sp.Threshold)
	if err != nil {
		return 0, fmt.Errorf("detect spikes: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("detect spikes: %w", err)
	}
	return int(n), nil
}

// PruneNotifications deletes events older than age whose deliveries have
// all settled, with their deliveries, and returns how many events went.
func (s *Store) PruneNotifications(ctx context.Context, age time.Duration) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM notification_events e
		WHERE e.fanned_out AND e.created_at < now() - $1 * interval '1 millisecond'
		AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.event_id = e.id AND d.state = 'pending')`,
		age.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("prune notifications: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune notifications: %w", err)
	}
	return int(n), nil
}

// Group returns the error group with fingerprint, its sample message's
// arguments included for masking (ErrNotFound when there is none).
func (s *Store) Group(ctx context.Context, fingerprint string) (ErrorGroup, error) {
	var g ErrorGroup
	q := `SELECT g.*, sample.* FROM (SELECT ` + groupColumns + ` FROM error_groups WHERE fingerprint = $1) g` + groupSampleJoin
	if err := s.db.GetContext(ctx, &g, q, fingerprint); err != nil {
		return ErrorGroup{}, fmt.Errorf("error group %s: %w", fingerprint, translate(err))
	}
	return g, nil
}
