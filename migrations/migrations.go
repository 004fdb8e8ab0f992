// Package migrations embeds Redrive's SQL schema, applied in order by goose.
package migrations

import "embed"

// FS holds the numbered goose migration files.
//
//go:embed *.sql
var FS embed.FS
