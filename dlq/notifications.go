package dlq

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"
)

// The kinds of notification event. Triggers write the group and operation
// events in the same transaction as what they report (00107_notifications.sql);
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

// The follow-through of a bulk replay: it waits for a decision.
const (
	NotifyOperationAutoPaused   = "operation_auto_paused"
	NotifyOperationCanaryFailed = "operation_canary_failed"
)

// NotifyGroupNewDigest is the message of a digest of several new groups
// (SealNewGroupDigests); its events stay group_new.
const NotifyGroupNewDigest = "group_new_digest"

// The states of a delivery.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	// DeliverySkipped: settled without a message of its own (a new group
	// merged into another before it was announced).
	DeliverySkipped = "skipped"
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
	// DigestID names the digest a group_new delivery was sealed into (nil:
	// not yet, or another kind).
	DigestID *int64 `db:"digest_id"`
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

// Outcome is what recording a writes: the delivery's new state, the HTTP
// status (nil: no answer) and the next attempt's time.
func (a DeliveryAttempt) Outcome() (state string, status *int, retryAt time.Time) {
	state = DeliveryPending
	switch {
	case a.Delivered:
		state = DeliveryDelivered
	case a.RetryAt.IsZero():
		state = DeliveryFailed
	}
	if a.Status != 0 {
		status = &a.Status
	}
	retryAt = a.RetryAt
	if retryAt.IsZero() {
		retryAt = time.Now()
	}
	return state, status, retryAt
}

// New error groups are announced in digests, at most one message per
// endpoint per window, so that an outage that makes 500 groups is one
// message rather than 500 (00107_notifications.sql). The outbox stays as it is:
// one group_new event per group, one delivery per event and endpoint. The
// sender, in each pass:
//
//  1. seals (SealNewGroupDigests): for each endpoint with a group_new
//     delivery due, whose window has passed and which has no digest still
//     being tried, it opens a new window and sets digest_id on all that
//     endpoint's pending group_new deliveries not yet sealed; an endpoint
//     still inside its window has them postponed to the window's end. One
//     statement, so one transaction: a crash before it commits leaves
//     nothing sealed and no window opened, and the next pass seals the
//     same deliveries; after, the digest's members are fixed.
//  2. posts each due digest (DueDigests), composed from its members as
//     they are fixed in the database. No transaction is open while the
//     webhook answers (the lease's reason, 00107_notifications.sql).
//  3. records the attempt on every member at once (RecordDigestAttempt),
//     one statement again: the digest is delivered, retried or given up as
//     a whole, and a delivered one moves its endpoint's window to the send.
//
// So a group's announcement is never lost: its delivery stays pending
// until a digest holding it is recorded delivered, or given up after
// MaxAttempts and shown as failed. And it is never in two messages: it is
// sealed once (digest_id IS NULL is the condition of sealing, and the
// window's row, checked and moved in the same statement, serializes two
// senders), and a retry posts the same members under the same id. The one
// duplicate left is the outbox's own, at least once: a crash, or a lost
// lease, between the webhook's answer and step 3 posts that same digest
// again, with the same id, for the receiver to deduplicate.

// DigestTiming is when new-group digests go out.
type DigestTiming struct {
	// Window: an endpoint gets at most one digest per Window; the groups
	// found meanwhile wait for its end.
	Window time.Duration
	// Gather: a new group waits this long before its digest is sealed, so
	// that the groups of one outage, which appear within seconds of each
	// other (one per task it hits), are announced in one message, not in
	// one now and one a window later (Alertmanager's group_wait).
	Gather time.Duration
}

// DigestSealing is what one SealNewGroupDigests did.
type DigestSealing struct {
	// Digests were sealed, holding Sealed deliveries in all.
	Digests int `db:"digests"`
	Sealed  int `db:"sealed"`
	// Postponed deliveries wait for their endpoint's window to pass.
	Postponed int `db:"postponed"`
	// Skipped deliveries' groups were merged away before they were sealed.
	Skipped int `db:"skipped"`
}

// NewGroupDigest is one endpoint's digest of new error groups: the
// group_new events sealed together, to be announced in one message.
type NewGroupDigest struct {
	// ID is the digest's lowest event id, the message's id: the same at
	// every attempt, and carried by no other message to the endpoint.
	ID           int64
	EndpointHash string
	Endpoint     string
	// Attempts made at it so far.
	Attempts int
	// Events are its groups' events, oldest first.
	Events []NotificationEvent
}

// Spike is what counts as a group spiking: at least Threshold letters
// within Window. A group is announced again only after Quiet.
type Spike struct {
	Threshold int
	Window    time.Duration
	Quiet     time.Duration
}
