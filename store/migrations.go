package store

import "time"

// MigrationSummary is what a store's start-up migration did, for one log
// line instead of one per migration: Applied migrations, from version
// From (0 on an empty database) to To, in Duration in total. Applied is 0
// on a start that found the schema current.
type MigrationSummary struct {
	Dialect  string // "sqlite" or "postgres"
	Applied  int
	From, To int64
	Duration time.Duration
}

// MigrationReporter is implemented by the stores (sqlite.DB,
// postgres.DB): the summary of the migrations their Open applied.
type MigrationReporter interface {
	Migrations() MigrationSummary
}
