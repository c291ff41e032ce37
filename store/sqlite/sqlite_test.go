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
