package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
)

// init plugs the PostgreSQL store into openStore: `acrelay serve
// --database-url postgres://…` (or ACRELAY_DATABASE_URL / _FILE).
func init() {
	postgresOpener = func(ctx context.Context, url string, logger *slog.Logger, obs store.Observer) (store.Store, error) {
		db, err := postgres.OpenWith(ctx, url, logger, postgres.Options{Observer: obs})
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return db, nil
	}
}
