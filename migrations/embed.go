// Package migrations holds Lifeline's versioned SQL migrations, one folder per dialect
// (postgres, sqlite), applied with goose. River's own tables are migrated by River's
// migrator (see models.Migrate), not here.
package migrations

import "embed"

// FS holds postgres/*.sql and sqlite/*.sql.
//
//go:embed postgres/*.sql sqlite/*.sql
var FS embed.FS
