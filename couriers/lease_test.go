package couriers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestIdleHoldersOnPostgresWriteByLeases: three processes (three
// connection pools, three holders) on one PostgreSQL database run the
// same three couriers over 1,000 idle projects. Each process writes at
// most one transaction per courier per renewal interval (its renewal): a
// lease held by another process is read, never retried as a write (which
// on PostgreSQL would also lock the other holder's row).
func TestIdleHoldersOnPostgresWriteByLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 3 processes × 1,000 projects")
	}
	url := pgtest.FreshDatabase(t)
	const processes, projects = 3, 1000
	stores := make([]*faultyStore, processes)
	for i := range stores {
		stores[i] = &faultyStore{Store: teststore.Postgres(t, url)}
	}
	for range projects {
		if _, err := stores[0].CreateProject(context.Background(), storetest.NewUUID()); err != nil {
			t.Fatal(err)
		}
	}
	const ttl = 6 * time.Second // a renewal every 2 s
	names := []string{"export", "websub", "matrix"}
	runners := map[string][]*couriers.Runner{}
	for i, st := range stores {
		for _, name := range names {
			rec := newRecorder(st, "t")
			rec.name = name
			r := couriers.NewRunner(st, rec, couriers.Options{Holder: fmt.Sprintf("process-%d", i), LeaseTTL: ttl})
			runners[name] = append(runners[name], r)
			start(t, r)
		}
	}
	waitFor(t, "every lease held by one of the processes", func() bool {
		for _, name := range names {
			n := 0
			for _, r := range runners[name] {
				n += r.Status().Projects
			}
			if n != projects {
				return false
			}
		}
		return true
	})
	time.Sleep(ttl / 3) // one more interval: the start-up race has settled
	before := make([]int64, processes)
	for i, st := range stores {
		before[i] = st.writes.Load()
	}
	t0 := time.Now()
	time.Sleep(8 * time.Second) // the measured window: idle
	window := time.Since(t0)
	bound := float64(len(names)) * (window.Seconds()/(ttl/3).Seconds() + 1) // one renewal per courier per interval
	for i, st := range stores {
		writes := st.writes.Load() - before[i]
		held := 0
		for _, name := range names {
			held += runners[name][i].Status().Projects
		}
		t.Logf("process %d (holding %d leases): %d write transactions in %v; bound %.0f", i, held, writes, window.Round(time.Millisecond), bound)
		if float64(writes) > bound {
			t.Errorf("process %d: %d write transactions in %v, want at most %.0f (one renewal per courier per %v)", i, writes, window, bound, ttl/3)
		}
	}
}
