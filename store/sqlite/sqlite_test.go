package sqlite_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

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

// TestRegistryWritesAreCheckpointed: writes that are not appends (here
// tokens) reach the database file within a few idle checkpoint intervals;
// before, only appends started a checkpoint, and a relay that only minted
// tokens grew its WAL without bound.
func TestRegistryWritesAreCheckpointed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acrelay.db")
	db, err := sqlite.OpenWith(context.Background(), path, nil, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	p := must(db.CreateProject(context.Background(), storetest.NewUUID()))
	time.Sleep(3 * time.Second) // the first idle cycle copies the project
	before := size()
	sum := sha256.Sum256([]byte("x"))
	for i := range 2000 {
		if _, err := db.CreateToken(context.Background(), store.Token{ID: fmt.Sprintf("token%05d", i), ProjectID: p.ID, Scopes: []string{store.ScopeRead}, Hash: sum[:]}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); size() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("after 2,000 tokens and 10 s the database file is still %d bytes: the WAL was not checkpointed", before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
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
