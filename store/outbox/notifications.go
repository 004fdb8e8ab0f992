package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
	"github.com/redrive/redrive/dlq"
	"github.com/redrive/redrive/store/postgres"
)

// AcquireNotificationSender takes or renews the sender's lease for holder:
// one console instance sends at a time. It reports whether holder has it.
func (s *Store) AcquireNotificationSender(ctx context.Context, holder string, lease time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE notification_sender
		SET holder = $1, held_until = now() + $2 * interval '1 millisecond'
		WHERE holder = $1 OR held_until < now()`, holder, lease.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("acquire notification sender: %w", postgres.Translate(err))
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
		return fmt.Errorf("release notification sender: %w", postgres.Translate(err))
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
func (s *Store) FanOutNotifications(ctx context.Context, endpoints []dlq.NotificationEndpoint, limit int) (int, error) {
	hashes, redacted := make([]string, len(endpoints)), make([]string, len(endpoints))
	for i, e := range endpoints {
		hashes[i], redacted[i] = e.Hash, e.Redacted
	}
	res, err := s.db.ExecContext(ctx, fanOutSQL, pq.Array(hashes), pq.Array(redacted), limit)
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", postgres.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("fan out notifications: %w", err)
	}
	return int(n), nil
}

const deliveryColumns = `e.id, e.kind, e.subject, e.facts, e.created_at, d.endpoint_hash, d.endpoint, d.state,
	d.attempts, d.next_attempt_at, d.last_error, d.last_status, d.delivered_at, d.updated_at, d.digest_id`

// DueNotifications returns up to limit pending deliveries whose next attempt
// is due, oldest first: those sent one message each, that is all but the
// new groups, which go in digests (DueDigests).
func (s *Store) DueNotifications(ctx context.Context, limit int) ([]dlq.NotificationDelivery, error) {
	var ds []dlq.NotificationDelivery
	err := s.db.SelectContext(ctx, &ds, `SELECT `+deliveryColumns+`
		FROM notification_deliveries d JOIN notification_events e ON e.id = d.event_id
		WHERE d.state = 'pending' AND d.next_attempt_at <= now() AND e.kind <> 'group_new'
		ORDER BY d.next_attempt_at, e.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", postgres.Translate(err))
	}
	return ds, nil
}

// RecordDeliveryAttempt records an attempt at a pending delivery. A
// delivery already settled (by another sender whose lease ran out while it
// posted) is left as it is.
func (s *Store) RecordDeliveryAttempt(ctx context.Context, a dlq.DeliveryAttempt) error {
	state, status, retryAt := a.Outcome()
	_, err := s.db.ExecContext(ctx, `UPDATE notification_deliveries SET
		state = $3, attempts = attempts + 1, last_status = $4, last_error = $5, next_attempt_at = $6,
		delivered_at = CASE WHEN $3 = 'delivered' THEN now() END, updated_at = now()
		WHERE event_id = $1 AND endpoint_hash = $2 AND state = 'pending'`,
		a.EventID, a.EndpointHash, state, status, a.Error, retryAt)
	if err != nil {
		return fmt.Errorf("record delivery attempt: %w", postgres.Translate(err))
	}
	return nil
}

// mergedAwaySQL is true of a group_new event e whose group was merged into
// another before its announcement went out (error_group_merges keeps the
// old id in from_id): its letters are the survivor's, so it is no new
// failure, and its delivery is settled as skipped at sealing, not listed,
// whatever its endpoint's window. A group merged after its digest was
// sealed is still in it: the digest is retried as it was sealed.
const mergedAwaySQL = `EXISTS (SELECT 1 FROM error_group_merges m WHERE m.from_id = e.subject)`

// sealDigestsSQL seals new-group digests, $1 being the window in ms and
// $2 the gathering time (DigestTiming): a delivery is due once its next
// attempt is due and its group is $2 old. See
// the steps above: unsealed is every pending group_new delivery not yet in
// a digest, of the endpoints that have one due, locked in one order, so
// that two senders sealing at once (one whose lease ran out) take turns
// rather than deadlock, and the second finds sealed what the first sealed
// (FOR UPDATE reads a row's latest version and checks its WHERE again);
// waiting, the endpoints with one due, and until when their digest in
// flight (if any) is being tried; opened, those whose window it
// opened, the ON CONFLICT's WHERE being the check that the last one has
// passed. Each unsealed delivery is then skipped (merged away), sealed
// (its endpoint opened: the digest's id is its lowest event id, which no
// other message to the endpoint carries), or, when due, postponed to the
// end of its endpoint's window or of the digest in flight, whichever is
// later, so that the pass after does not look at it again before then.
const sealDigestsSQL = `
WITH unsealed AS (
	SELECT d.event_id, d.endpoint_hash, d.next_attempt_at <= now() AND e.created_at <= now() - $2 * interval '1 millisecond' AS due,
		(` + mergedAwaySQL + `) AS merged_away
	FROM notification_deliveries d JOIN notification_events e ON e.id = d.event_id
	WHERE d.state = 'pending' AND d.digest_id IS NULL AND e.kind = 'group_new'
	AND d.endpoint_hash IN (SELECT x.endpoint_hash FROM notification_deliveries x JOIN notification_events xe ON xe.id = x.event_id
		WHERE x.state = 'pending' AND x.digest_id IS NULL AND xe.kind = 'group_new' AND x.next_attempt_at <= now()
		AND xe.created_at <= now() - $2 * interval '1 millisecond')
	ORDER BY d.endpoint_hash, d.event_id
	FOR UPDATE OF d
), waiting AS (
	SELECT u.endpoint_hash, (SELECT min(p.next_attempt_at) FROM notification_deliveries p
		WHERE p.endpoint_hash = u.endpoint_hash AND p.state = 'pending' AND p.digest_id IS NOT NULL) AS in_flight_until
	FROM unsealed u WHERE u.due AND NOT u.merged_away
	GROUP BY u.endpoint_hash
), opened AS (
	INSERT INTO notification_digest_windows AS w (endpoint_hash, opened_at)
	SELECT endpoint_hash, now() FROM waiting WHERE in_flight_until IS NULL ORDER BY endpoint_hash
	ON CONFLICT (endpoint_hash) DO UPDATE SET opened_at = EXCLUDED.opened_at
	WHERE w.opened_at <= now() - $1 * interval '1 millisecond'
	RETURNING endpoint_hash
), digests AS (
	SELECT u.endpoint_hash, min(u.event_id) AS digest_id
	FROM unsealed u JOIN opened o ON o.endpoint_hash = u.endpoint_hash
	WHERE NOT u.merged_away
	GROUP BY u.endpoint_hash
), plan AS (
	SELECT u.event_id, u.endpoint_hash, g.digest_id,
		CASE WHEN u.merged_away THEN 'skip' WHEN g.digest_id IS NOT NULL THEN 'seal' ELSE 'wait' END AS step,
		greatest(now(), w.in_flight_until, win.opened_at + $1 * interval '1 millisecond') AS wait_until
	FROM unsealed u
	LEFT JOIN digests g ON g.endpoint_hash = u.endpoint_hash
	LEFT JOIN waiting w ON w.endpoint_hash = u.endpoint_hash
	LEFT JOIN notification_digest_windows win ON win.endpoint_hash = u.endpoint_hash
	WHERE u.merged_away OR g.digest_id IS NOT NULL OR u.due
), changed AS (
	UPDATE notification_deliveries d SET
		digest_id = p.digest_id,
		state = CASE p.step WHEN 'skip' THEN 'skipped' ELSE 'pending' END,
		last_error = CASE p.step WHEN 'skip' THEN 'not announced: its group was merged into another first' ELSE d.last_error END,
		next_attempt_at = CASE p.step WHEN 'seal' THEN now() WHEN 'wait' THEN p.wait_until ELSE d.next_attempt_at END,
		updated_at = now()
	FROM plan p
	WHERE d.event_id = p.event_id AND d.endpoint_hash = p.endpoint_hash AND d.state = 'pending' AND d.digest_id IS NULL
	RETURNING p.step, p.endpoint_hash
)
SELECT count(DISTINCT endpoint_hash) FILTER (WHERE step = 'seal') AS digests,
	count(*) FILTER (WHERE step = 'seal') AS sealed,
	count(*) FILTER (WHERE step = 'wait') AS postponed,
	count(*) FILTER (WHERE step = 'skip') AS skipped
FROM changed`

// HasUnsealedNewGroups reports whether a new group waits to be sealed into
// a digest: the cheap question asked before reading the incidents.
func (s *Store) HasUnsealedNewGroups(ctx context.Context) (bool, error) {
	var yes bool
	err := s.db.GetContext(ctx, &yes, `SELECT EXISTS (SELECT 1 FROM notification_deliveries d
		JOIN notification_events e ON e.id = d.event_id
		WHERE d.state = 'pending' AND d.digest_id IS NULL AND e.kind = 'group_new')`)
	if err != nil {
		return false, fmt.Errorf("unsealed new groups: %w", postgres.Translate(err))
	}
	return yes, nil
}

// incidentRepeatWithin is how recently another group of an incident must
// have been announced to an endpoint for a new group of it to be no news.
const incidentRepeatWithin = time.Hour

// skipIncidentRepeatsSQL settles as skipped the unsealed new-group
// deliveries of a group in one of the incidents $1/$2 (group id, incident
// id) when another group of that incident was announced to the same
// endpoint within $3 ms: delivered, or sealed into a digest being sent.
const skipIncidentRepeatsSQL = `
WITH member AS (
	SELECT group_id, incident FROM unnest($1::text[], $2::text[]) AS m(group_id, incident)
), repeat AS (
	SELECT d.event_id, d.endpoint_hash, min(other.subject) AS announced
	FROM notification_deliveries d
	JOIN notification_events e ON e.id = d.event_id
	JOIN member m ON m.group_id = e.subject
	JOIN member om ON om.incident = m.incident AND om.group_id <> m.group_id
	JOIN notification_events other ON other.kind = 'group_new' AND other.subject = om.group_id
		AND other.created_at > now() - $3 * interval '1 millisecond'
	JOIN notification_deliveries od ON od.event_id = other.id AND od.endpoint_hash = d.endpoint_hash
		AND (od.state = 'delivered' OR od.state = 'pending' AND od.digest_id IS NOT NULL)
	WHERE d.state = 'pending' AND d.digest_id IS NULL AND e.kind = 'group_new'
	GROUP BY d.event_id, d.endpoint_hash
)
UPDATE notification_deliveries d SET state = 'skipped', updated_at = now(),
	last_error = 'not announced: the same failure as group ' || r.announced || ', announced already (one incident)'
FROM repeat r
WHERE d.event_id = r.event_id AND d.endpoint_hash = r.endpoint_hash AND d.state = 'pending' AND d.digest_id IS NULL`

// SkipIncidentRepeats settles as skipped the new groups not yet sealed
// that join an incident already announced: an outage that reaches a
// second task minutes after the first is the same news, on the incident's
// page already. It returns how many deliveries it skipped.
func (s *Store) SkipIncidentRepeats(ctx context.Context, incidents []dlq.Incident) (int, error) {
	var groups, keys []string
	for _, inc := range incidents {
		for _, g := range inc.Groups {
			groups, keys = append(groups, g.Fingerprint), append(keys, inc.ID)
		}
	}
	if len(groups) == 0 {
		return 0, nil
	}
	res, err := s.db.ExecContext(ctx, skipIncidentRepeatsSQL, pq.Array(groups), pq.Array(keys), incidentRepeatWithin.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("skip incident repeats: %w", postgres.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("skip incident repeats: %w", err)
	}
	return int(n), nil
}

// SealNewGroupDigests seals, for each endpoint whose last new-group window
// (of length window) has passed, a digest of all its pending new-group
// deliveries, and postpones the due ones of the other endpoints to their
// window's end. One statement: see the steps above.
func (s *Store) SealNewGroupDigests(ctx context.Context, t dlq.DigestTiming) (dlq.DigestSealing, error) {
	var r dlq.DigestSealing
	if err := s.db.GetContext(ctx, &r, sealDigestsSQL, t.Window.Milliseconds(), t.Gather.Milliseconds()); err != nil {
		return dlq.DigestSealing{}, fmt.Errorf("seal new-group digests: %w", postgres.Translate(err))
	}
	return r, nil
}

// DueDigests returns up to limit sealed digests whose next attempt is due,
// oldest first, each with all its events.
func (s *Store) DueDigests(ctx context.Context, limit int) ([]dlq.NewGroupDigest, error) {
	var rows []dlq.NotificationDelivery
	err := s.db.SelectContext(ctx, &rows, `WITH due AS (
			SELECT endpoint_hash, digest_id, min(next_attempt_at) AS next_attempt_at
			FROM notification_deliveries
			WHERE state = 'pending' AND digest_id IS NOT NULL AND next_attempt_at <= now()
			GROUP BY endpoint_hash, digest_id
			ORDER BY 3, 2 LIMIT $1
		)
		SELECT `+deliveryColumns+`
		FROM due JOIN notification_deliveries d ON d.endpoint_hash = due.endpoint_hash AND d.digest_id = due.digest_id
		JOIN notification_events e ON e.id = d.event_id
		WHERE d.state = 'pending'
		ORDER BY due.next_attempt_at, d.digest_id, d.endpoint_hash, e.id`, limit)
	if err != nil {
		return nil, fmt.Errorf("due digests: %w", postgres.Translate(err))
	}
	var ds []dlq.NewGroupDigest
	for _, r := range rows {
		if n := len(ds); n == 0 || ds[n-1].ID != *r.DigestID || ds[n-1].EndpointHash != r.EndpointHash {
			ds = append(ds, dlq.NewGroupDigest{ID: *r.DigestID, EndpointHash: r.EndpointHash, Endpoint: r.Endpoint})
		}
		g := &ds[len(ds)-1]
		g.Attempts = max(g.Attempts, r.Attempts)
		g.Events = append(g.Events, r.NotificationEvent)
	}
	return ds, nil
}

// RecordDigestAttempt records an attempt at the digest a.EventID of
// endpoint a.EndpointHash on all its pending deliveries, in one statement:
// the digest is delivered, retried or given up as a whole. Delivered, it
// also moves the endpoint's window to now, the time of the send. As
// RecordDeliveryAttempt, a digest already settled is left as it is.
func (s *Store) RecordDigestAttempt(ctx context.Context, a dlq.DeliveryAttempt) error {
	state, status, retryAt := a.Outcome()
	_, err := s.db.ExecContext(ctx, `WITH settled AS (
			UPDATE notification_deliveries SET
			state = $3, attempts = attempts + 1, last_status = $4, last_error = $5, next_attempt_at = $6,
			delivered_at = CASE WHEN $3 = 'delivered' THEN now() END, updated_at = now()
			WHERE endpoint_hash = $2 AND digest_id = $1 AND state = 'pending'
			RETURNING endpoint_hash
		)
		INSERT INTO notification_digest_windows AS w (endpoint_hash, opened_at)
		SELECT DISTINCT endpoint_hash, now() FROM settled WHERE $3 = 'delivered'
		ON CONFLICT (endpoint_hash) DO UPDATE SET opened_at = greatest(w.opened_at, EXCLUDED.opened_at)`,
		a.EventID, a.EndpointHash, state, status, a.Error, retryAt)
	if err != nil {
		return fmt.Errorf("record digest attempt: %w", postgres.Translate(err))
	}
	return nil
}

// NotificationDeliveries returns the latest deliveries, those given up
// first, for the admin page.
func (s *Store) NotificationDeliveries(ctx context.Context, limit int) ([]dlq.NotificationDelivery, error) {
	var ds []dlq.NotificationDelivery
	err := s.db.SelectContext(ctx, &ds, `SELECT `+deliveryColumns+`
		FROM (SELECT * FROM notification_deliveries ORDER BY updated_at DESC LIMIT $1) d
		JOIN notification_events e ON e.id = d.event_id
		ORDER BY d.state = 'failed' DESC, d.updated_at DESC`, limit)
	if err != nil {
		return nil, fmt.Errorf("notification deliveries: %w", postgres.Translate(err))
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

// DetectSpikes writes a group_spike event for each group spiking now and
// not announced within sp.Quiet, and returns how many it wrote.
func (s *Store) DetectSpikes(ctx context.Context, sp dlq.Spike) (int, error) {
	res, err := s.db.ExecContext(ctx, detectSpikesSQL, sp.Threshold, sp.Window.Milliseconds(), sp.Quiet.Milliseconds(), 10*sp.Threshold)
	if err != nil {
		return 0, fmt.Errorf("detect spikes: %w", postgres.Translate(err))
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
		return 0, fmt.Errorf("prune notifications: %w", postgres.Translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune notifications: %w", err)
	}
	return int(n), nil
}
