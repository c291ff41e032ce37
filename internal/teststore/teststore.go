// Package teststore opens real stores for tests of the layers above the
// store: SQLite always, PostgreSQL when ACRELAY_TEST_DATABASE_URL names a
// server (else that subtest skips, saying how to run it). No mocks.
package teststore

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
)

// Open opens a fresh store on one engine; its Close is registered with
// t.Cleanup.
type Open func(t *testing.T) store.Store

// Engines runs fn as subtests "sqlite" and "postgres".
func Engines(t *testing.T, fn func(t *testing.T, open Open)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite) })
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.FreshDatabase(t)
		fn(t, func(t *testing.T) store.Store { return Postgres(t, url) })
	})
}

// EnginesOnFakeTime is Engines with the "sqlite" subtest on fake time:
// fn runs inside a testing/synctest bubble and open opens the store
// there, so its writer and connection goroutines are the bubble's (a
// store opened outside the bubble answers on channels the bubble
// refuses). "postgres" runs on the real clock: the PostgreSQL store's
// LISTEN connection waits in a network read, which a bubble never counts
// as durably blocked, so its fake time would never advance.
func EnginesOnFakeTime(t *testing.T, fn func(t *testing.T, open Open)) {
	t.Run("sqlite", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { fn(t, SQLite) })
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.FreshDatabase(t)
		fn(t, func(t *testing.T) store.Store { return Postgres(t, url) })
	})
}

// SQLite opens a fresh SQLite store in t.TempDir().
func SQLite(t *testing.T) store.Store {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Postgres opens a store on the database at url.
func Postgres(t *testing.T, url string) store.Store {
	t.Helper()
	db, err := postgres.Open(context.Background(), url, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
