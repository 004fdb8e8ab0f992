package dlq

// EscapeLike is the store's escaping of a search term for ILIKE, for the
// test that searches a schema the store no longer reads.
var EscapeLike = escapeLike
