// Package replay holds the guarded actions on dead letters — replay,
// edit-and-replay, discard, restore, bulk operations — and the audit trail
// they write. It decides policy (who may act, which reasons are required,
// how a bulk selection is bounded, how fast a paced replay goes); the
// guarded state changes themselves are single transactions of the store's operations room.
// It knows nothing of HTTP or HTML.
package replay
