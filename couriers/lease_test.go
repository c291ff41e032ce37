package couriers_test

import (
	"context"
	"errors"
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
	acquiresBefore := make([]int64, processes)
	for i, st := range stores {
		before[i], acquiresBefore[i] = st.writes.Load(), st.acquires.Load()
	}
	t0 := time.Now()
	time.Sleep(8 * time.Second) // the measured window: idle
	window := time.Since(t0)
	intervals := window.Seconds()/(ttl/3).Seconds() + 1
	for i, st := range stores {
		writes, acquires := st.writes.Load()-before[i], st.acquires.Load()-acquiresBefore[i]
		held, holding := 0, 0 // leases, and couriers with at least one
		for _, name := range names {
			if n := runners[name][i].Status().Projects; n > 0 {
				held += n
				holding++
			}
		}
		// One renewal per courier it holds leases of, per interval; nothing
		// for the leases the other processes hold.
		bound := float64(holding) * intervals
		t.Logf("process %d (%d leases of %d couriers): %d write transactions (%d acquisitions) in %v; bound %.0f",
			i, held, holding, writes, acquires, window.Round(time.Millisecond), bound)
		if float64(writes) > bound || acquires != 0 {
			t.Errorf("process %d: %d write transactions (%d acquisitions) in %v, want at most %.0f and none (one renewal per held courier per %v)",
				i, writes, acquires, window, bound, ttl/3)
		}
	}
}

// TestDeliveryNeverOutlivesItsLease: a Deliver that blocks is cut at the
// safe time of the lease it started under, not at DeliveryTimeout: its
// context's deadline is before the lease expires by the database clock,
// though the delivery timeout is an hour. On SQLite on fake time.
func TestDeliveryNeverOutlivesItsLease(t *testing.T) {
	teststore.EnginesOnFakeTime(t, func(t *testing.T, open teststore.Open) {
		st := open(t)
		s := newProject(t, st)
		appendN(t, st, s, 1)
		rec := newRecorder(st, "a")
		type seen struct {
			deadline    time.Time
			hasDeadline bool
			leaseEnds   time.Time // a bound on the lease's expiry, on the local clock
			err         error
		}
		calls := make(chan seen, 16)
		const ttl = 2 * time.Second
		rec.hook = func(ctx context.Context, _ string, _ couriers.Target) error {
			// The lease this delivery started under was taken or renewed
			// before now, so it expires before now + ttl.
			var c seen
			c.deadline, c.hasDeadline = ctx.Deadline()
			c.leaseEnds = time.Now().Add(ttl)
			<-ctx.Done() // hangs, as a callback that never answers
			c.err = ctx.Err()
			calls <- c
			return ctx.Err()
		}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: ttl, DeliveryTimeout: time.Hour, Backoff: fast})
		start(t, r)
		for i := range 2 { // the first delivery, and its retry under renewed leases
			var c seen
			select {
			case c = <-calls:
			case <-time.After(30 * time.Second):
				t.Fatalf("delivery %d was not cut: it outlived its %v lease (delivery timeout 1h)", i, ttl)
			}
			if !c.hasDeadline {
				t.Fatalf("delivery %d has no deadline", i)
			}
			if !c.deadline.Before(c.leaseEnds) {
				t.Fatalf("delivery %d: deadline %v is not before the lease's expiry %v", i, c.deadline.Format(time.RFC3339Nano), c.leaseEnds.Format(time.RFC3339Nano))
			}
			if !errors.Is(c.err, context.DeadlineExceeded) {
				t.Fatalf("delivery %d ended with %v, want its deadline", i, c.err)
			}
		}
	})
}
