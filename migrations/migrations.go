// Package migrations embeds Redrive's SQL schema, applied in order by goose.
//
// The schema starts from a baseline of one file per area, from
// 00100_queue.sql to 00107_notifications.sql: each table, index, function
// and trigger is defined once, with the reasons for its shape beside it.
// From here on, one migration per change that ships, numbered after the
// last; a function it changes is written out whole in it, once.
//
// Versions 1 to 43 were the history before the baseline, squashed into it
// before any release. The baseline starts at Baseline so that none of those
// versions can be mistaken for one of its own: a database that holds one
// was migrated by an older build, and dlq.Migrate refuses it.
package migrations

import "embed"

// FS holds the numbered goose migration files.
//
//go:embed *.sql
var FS embed.FS

// Baseline is the version of the baseline's first file. A version below it
// in goose_db_version belongs to the history before the baseline.
const Baseline int64 = 100
