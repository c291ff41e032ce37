package sqlite_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

func openTemp(t *testing.T) store.Store {
	t.Helper()
	return openOpts(t, sqlite.Options{})
}

// openOpts opens a store on a temporary file with opts; Close runs in
// Cleanup.
func openOpts(t *testing.T, opts sqlite.Options) store.Store {
	t.Helper()
	db, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler), opts)
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
	storetest.Run(t, openTemp)
}

// TestMaxBatchRange: OpenWith refuses a MaxBatch it cannot honour (the
// queue is sized from it) instead of crashing; the limits themselves open.
func TestMaxBatchRange(t *testing.T) {
	for _, n := range []int{-1, sqlite.MaxBatchLimit + 1, 1 << 62} {
		db, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), nil, sqlite.Options{MaxBatch: n})
		if err == nil {
			db.Close()
			t.Fatalf("MaxBatch %d: opened, want an error", n)
		}
	}
	for _, n := range []int{0, 1, sqlite.MaxBatchLimit} {
		openOpts(t, sqlite.Options{MaxBatch: n})
	}
}

// TestWebSubDurable: the hub's subscriptions and pending verifications
// survive closing and reopening the file.
func TestWebSubDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acrelay.db")
	openAt := func(t *testing.T) store.Store {
		db, err := sqlite.Open(context.Background(), path, slog.New(slog.DiscardHandler))
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
