package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// storeConfig selects the store: PostgreSQL when DatabaseURL is set, else
// SQLite under DataDir.
type storeConfig struct {
	DataDir        string
	DatabaseURL    string
	SQLiteMaxBatch int
	SQLiteSync     string
	// Create lets openStore create a missing SQLite database and its
	// directory, as serve's first start does. Without it (the admin
	// commands) a directory with no database is refused, so a command run
	// from the wrong directory leaves no empty store behind.
	Create bool
	// Observer, when set, is told of the store's transactions (serve's
	// metrics); not a flag.
	Observer store.Observer
}

func addStoreFlags(cmd *cobra.Command, c *storeConfig) {
	cmd.Flags().StringVar(&c.DataDir, "data-dir", envOr("ACRELAY_DATA_DIR", "./acrelay-data"), "directory of the embedded SQLite database (ACRELAY_DATA_DIR)")
	cmd.Flags().IntVar(&c.SQLiteMaxBatch, "sqlite-max-batch", 128, "appends per SQLite group-commit transaction; 1 = one transaction per event, for comparison only (ACRELAY_SQLITE_MAX_BATCH)")
	cmd.Flags().StringVar(&c.SQLiteSync, "sqlite-sync", envOr("ACRELAY_SQLITE_SYNC", "fdatasync"), "system call SQLite commits with: fdatasync (as SQLite's Linux builds; same durability) or fsync (ACRELAY_SQLITE_SYNC)")
	cmd.Flags().StringVar(&c.DatabaseURL, "database-url", "", "PostgreSQL URL; when set, used instead of SQLite (ACRELAY_DATABASE_URL or _FILE)")
	bindEnv(cmd, "sqlite-max-batch", "ACRELAY_SQLITE_MAX_BATCH")
	bindSecretEnv(cmd, "database-url", "ACRELAY_DATABASE_URL")
}

// errNoStore: an admin command found no SQLite database to open.
var errNoStore = errors.New("no acrelay store")

func (c storeConfig) describe() string {
	if c.DatabaseURL != "" {
		return "postgres"
	}
	return "sqlite:" + filepath.Join(c.DataDir, "acrelay.db")
}

// postgresOpener is set by storeopen_postgres.go once that store exists.
var postgresOpener func(ctx context.Context, url string, logger *slog.Logger, obs store.Observer) (store.Store, error)

// check refuses store settings openStore cannot honour; serve calls it
// before anything process-wide is set.
func (c storeConfig) check() error {
	if c.DatabaseURL != "" {
		if postgresOpener == nil {
			return fmt.Errorf("--database-url: the PostgreSQL store is not built into this binary")
		}
		return nil
	}
	if c.SQLiteMaxBatch < 1 || c.SQLiteMaxBatch > sqlite.MaxBatchLimit {
		return fmt.Errorf("--sqlite-max-batch (ACRELAY_SQLITE_MAX_BATCH) %d: want 1 to %d", c.SQLiteMaxBatch, sqlite.MaxBatchLimit)
	}
	if c.SQLiteSync != "fdatasync" && c.SQLiteSync != "fsync" {
		return fmt.Errorf("--sqlite-sync (ACRELAY_SQLITE_SYNC) %q: want fdatasync or fsync", c.SQLiteSync)
	}
	return nil
}

func openStore(ctx context.Context, c storeConfig, logger *slog.Logger) (store.Store, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if c.DatabaseURL != "" {
		return postgresOpener(ctx, c.DatabaseURL, logger, c.Observer)
	}
	if err := sqlite.UseFdatasync(c.SQLiteSync == "fdatasync"); err != nil {
		logger.Warn("sqlite: fdatasync unavailable here; committing with fsync", "err", err)
	}
	path := filepath.Join(c.DataDir, "acrelay.db")
	if !c.Create {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w in %s (run acrelay serve once to create it, or pass --data-dir / ACRELAY_DATA_DIR)", errNoStore, c.DataDir)
		}
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	db, err := sqlite.OpenWith(ctx, path, logger, sqlite.Options{MaxBatch: c.SQLiteMaxBatch, Observer: c.Observer})
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	return db, nil
}
