package postgres_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/acrelay/acrelay/internal/pgtest"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

func freshDatabase(t testing.TB) string { return pgtest.FreshDatabase(t) }

func openFresh(t testing.TB) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), freshDatabase(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openFresh(t) })
}

// TestWebSubDurable: the hub's subscriptions and pending verifications
// survive closing the pool and opening the database again.
func TestWebSubDurable(t *testing.T) {
	url := freshDatabase(t)
	openAt := func(t *testing.T) store.Store {
		db, err := postgres.Open(context.Background(), url, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	storetest.WebSubDurable(t, openAt, func(t *testing.T, s store.Store) store.Store {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return openAt(t)
	})
}
