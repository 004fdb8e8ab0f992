// Package dlq is the store's vocabulary: jobs, dead letters, filters and
// their validation, bulk operations, pauses, error groups and incidents,
// users and roles, audit entries, notifications, and the coded error every
// part of Redrive answers with. It holds no query: the SQL lives in the
// store's rooms (store/queue, store/letters, store/groups,
// store/operations, store/access, store/audit, store/outbox), each over
// the tables it owns, sharing store/postgres.
//
// A file here carries the words of the room file of the same name
// (pause.go beside store/queue/pause.go), so that a type and the queries
// that read and write it are found by one name.
//
// The states of a job and of a letter, and the delivery contract, are
// told in store/queue and in docs/architecture.md.
package dlq
