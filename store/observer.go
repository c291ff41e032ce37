package store

import (
	"context"
	"time"
)

// Observer is told how long the store's transactions take, for metrics.
// A store accepts one at open (sqlite.Options.Observer,
// postgres.Options.Observer); nil observes nothing. Its methods are called
// on the store's hot path, from any goroutine: they must be cheap and
// safe for concurrent use, and must not call back into the store.
type Observer interface {
	// ObserveTx reports one transaction named op (a fixed name such as
	// "append" or "activate subscription", never an id) that took d and
	// failed when err is non-nil.
	ObserveTx(op string, d time.Duration, err error)
	// ObserveGroupCommit reports one group-commit transaction holding
	// appends appends (the SQLite writer's batch, a PostgreSQL project
	// batch) that took d from its begin to its commit.
	ObserveGroupCommit(appends int, d time.Duration, err error)
}

// MigrationChecker is a store that can tell whether its schema is current:
// PendingMigrations is the number of embedded migrations not applied to
// the database (0 once start-up migrated it; more when the database was
// replaced by an older one underneath a running process). The relay's GET
// /readyz answers 503 while it is not 0 or cannot be read.
type MigrationChecker interface {
	PendingMigrations(ctx context.Context) (int, error)
}
