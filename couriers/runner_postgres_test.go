package couriers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// The two tests below are the real-clock PostgreSQL halves of
// TestBackoffIsDurable and TestIdleRunnersWriteByLeasesNotProjects, which
// run on SQLite inside a synctest bubble (PostgreSQL's LISTEN connection
// blocks in a network read, so fake time never moves there). They keep
// the checks those tests made on both engines before they moved.

// postgresOnly runs fn on a fresh PostgreSQL store (skipped without one).
func postgresOnly(t *testing.T, fn func(t *testing.T, open func(*testing.T) store.Store)) {
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.FreshDatabase(t)
		fn(t, func(t *testing.T) store.Store { return teststore.Postgres(t, url) })
	})
}

// TestBackoffIsDurableOnPostgres: a target's backoff survives a restart: the next
// process neither hammers the dead target nor forgets it.
func TestBackoffIsDurableOnPostgres(t *testing.T) {
	postgresOnly(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		s := newProject(t, st)
		appendN(t, st, s, 3)
		rec := newRecorder(st, "dead")
		rec.hook = func(context.Context, string, couriers.Target) error { return errors.New("connection refused") }
		hour := couriers.Backoff{Initial: time.Hour, Max: 2 * time.Hour}
		opts := couriers.Options{Holder: "first", LeaseTTL: time.Second, Refresh: 20 * time.Millisecond, Backoff: hour}
		stop := start(t, couriers.NewRunner(st, rec, opts))
		waitFor(t, "one attempt", func() bool { return rec.attemptsOf("dead") == 1 })
		var state store.TargetState
		waitFor(t, "the failure recorded", func() bool {
			states, _ := st.TargetStates(context.Background(), "recorder", s.ProjectID)
			if len(states) == 1 {
				state = states[0]
			}
			return state.Failures == 1
		})
		if state.RetryIn < 29*time.Minute || state.LastError != "connection refused" || state.ReceivedSeq != 0 {
			t.Fatalf("state %+v: want retry in 30–60 min", state)
		}
		stop()

		opts.Holder = "second"
		r2 := couriers.NewRunner(st, rec, opts)
		start(t, r2)
		waitFor(t, "the second runner's lease", func() bool { return r2.Status().Projects == 1 })
		rec.waitRefreshes(t, 3)
		if n := rec.attemptsOf("dead"); n != 1 {
			t.Fatalf("restarted runner attempted %d deliveries during the backoff", n)
		}
		if got := r2.Status(); got.Failing != 1 || got.Behind != 3 {
			t.Fatalf("status %+v", got)
		}
	})
}

// TestIdleRunnersWriteByLeasesNotProjectsOnPostgres: with 1,000 projects, three
// couriers and nothing appended, the store's write transactions per second
// are bounded by the lease renewals (one per courier per third of the
// lease), not by the number of projects.
func TestIdleRunnersWriteByLeasesNotProjectsOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 1,000 projects")
	}
	postgresOnly(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := &faultyStore{Store: open(t)}
		const projects = 1000
		for range projects {
			if _, err := st.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
				t.Fatal(err)
			}
		}
		// A renewal every 2 s; each keeper call may take up to a fifth of
		// the lease (1.2 s) on a loaded test machine.
		const ttl = 6 * time.Second
		var runners []*couriers.Runner
		for _, name := range []string{"export", "websub", "matrix"} {
			rec := newRecorder(st, "t")
			rec.name = name
			r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: ttl})
			runners = append(runners, r)
			start(t, r)
		}
		waitFor(t, "every lease held", func() bool {
			for _, r := range runners {
				if s := r.Status(); s.Projects != projects || s.Targets != projects {
					return false
				}
			}
			return true
		})
		before, t0 := st.writes.Load(), time.Now()
		time.Sleep(6 * time.Second) // the measured window: idle
		writes, window := st.writes.Load()-before, time.Since(t0)
		perSecond := float64(writes) / window.Seconds()
		bound := 3 * (window.Seconds()/(ttl/3).Seconds() + 1) // one renewal per courier per interval
		t.Logf("idle: %d courier write transactions in %v (%.1f/s) for %d projects × 3 couriers; bound %.0f", writes, window.Round(time.Millisecond), perSecond, projects, bound)
		if float64(writes) > bound {
			t.Fatalf("%d write transactions in %v, want at most %.0f (one renewal per courier per %v)", writes, window, bound, ttl/3)
		}
		if writes == 0 {
			t.Fatal("no renewals at all: the leases would lapse")
		}
	})
}
