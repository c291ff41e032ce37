package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

// BenchmarkAppendClients: the same loads as store/postgres's
// BenchmarkAppend (storetest.BenchAppend), for comparison.
func BenchmarkAppendClients(b *testing.B) {
	for _, tc := range []struct{ clients, projects int }{{1, 1}, {16, 1}, {16, 4}} {
		b.Run(fmt.Sprintf("clients=%d/projects=%d", tc.clients, tc.projects), func(b *testing.B) {
			db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), discard)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			storetest.BenchAppend(b, db, tc.clients, tc.projects)
		})
	}
}
