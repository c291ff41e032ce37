package postgres_test

import (
	"fmt"
	"testing"

	"github.com/acrelay/acrelay/store/storetest"
)

// BenchmarkAppend: Append throughput with 1 and 16 concurrent clients, on
// one project (every append serialized by its stream lock) and over 4
// projects. Run with ACRELAY_TEST_DATABASE_URL set, e.g.
// go test -run '^$' -bench Append -benchtime 2000x ./store/postgres
func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct{ clients, projects int }{{1, 1}, {16, 1}, {16, 4}} {
		b.Run(fmt.Sprintf("clients=%d/projects=%d", tc.clients, tc.projects), func(b *testing.B) {
			storetest.BenchAppend(b, openFresh(b), tc.clients, tc.projects)
		})
	}
}
