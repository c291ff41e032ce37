package lease_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// waitHeld waits, on the keeper's publications, until cond holds of the
// held set, and returns that set.
func waitHeld(t *testing.T, k *lease.Keeper, what string, cond func(lease.Set) bool) lease.Set {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		s, changed := k.Held()
		if cond(s) {
			return s
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// holds is the waitHeld condition "projectID's lease is held".
func holds(projectID string) func(lease.Set) bool {
	return func(s lease.Set) bool { _, ok := s.Find(projectID); return ok }
}

// held is the keeper's held set now.
func held(k *lease.Keeper) lease.Set {
	s, _ := k.Held()
	return s
}

// chanCtx is a context that ends at the keeper's next publication.
func chanCtx(k *lease.Keeper) context.Context {
	_, changed := k.Held()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-changed; cancel() }()
	return ctx
}

// waitDone waits until ctx ends.
func waitDone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func run(t *testing.T, run func(ctx context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// TestIdentityKeptAndLocked: the identity is kept in the data directory
// and reclaimed by the next process; while one process holds it, another
// on the same directory gets a fresh one that reclaims nothing.
func TestIdentityKeptAndLocked(t *testing.T) {
	dir := t.TempDir()
	first, err := lease.OpenIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first.Reclaim || first.ID == "" {
		t.Fatalf("first identity %+v: want a fresh id that reclaims nothing", first)
	}
	second, err := lease.OpenIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == first.ID || second.Reclaim {
		t.Fatalf("a second live process on one data dir got %+v (first %q)", second, first.ID)
	}
	second.Close()
	first.Close()
	again, err := lease.OpenIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.ID != first.ID || !again.Reclaim {
		t.Fatalf("restarted identity %+v, want %q reclaiming", again, first.ID)
	}
	b, err := os.ReadFile(filepath.Join(dir, lease.IdentityFile))
	if err != nil || string(b) != first.ID+"\n" {
		t.Fatalf("identity file %q %v", b, err)
	}
	if fresh, err := lease.OpenIdentity(""); err != nil || fresh.Reclaim || fresh.ID == first.ID {
		t.Fatalf("no data dir: %+v %v", fresh, err)
	}
}

// TestKeeperReadsBeforeTaking: a lease live with another holder is read,
// never asked for; once released it is taken at the next interval; a
// restarted holder reclaims its leases under new fences at once.
func TestKeeperReadsBeforeTaking(t *testing.T) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		st := &countingStore{Store: open(t)}
		ctx := context.Background()
		p1 := must(st.CreateProject(ctx, storetest.NewUUID())).ID
		p2 := must(st.CreateProject(ctx, storetest.NewUUID())).ID
		if _, err := st.AcquireLeases(ctx, "job", "other", []string{p2}, time.Hour); err != nil {
			t.Fatal(err)
		}
		st.acquires.Store(0)
		const ttl = 900 * time.Millisecond
		k := lease.New(st, lease.Options{Name: "job", Holder: &lease.Identity{ID: "me"}, TTL: ttl,
			Wanted: func(context.Context) ([]string, error) { return []string{p1, p2}, nil }, ListEvery: time.Millisecond})
		stop := run(t, k.Run)
		waitHeld(t, k, "p1's lease", holds(p1))
		for range 3 { // three intervals: each publishes
			waitDone(t, chanCtx(k), "the next renewal interval")
		}
		if _, ok := held(k).Find(p2); ok {
			t.Fatal("took a lease another holder keeps")
		}
		if n := st.acquires.Load(); n != 1 {
			t.Fatalf("%d acquisitions, want 1 (p1 only; p2 is read, not asked for)", n)
		}
		h, _ := held(k).Find(p1)
		if d, ok := k.Deadline(h.Lease, time.Hour); !ok || !d.Equal(h.SafeUntil) || time.Until(d) > ttl {
			t.Fatalf("deadline %v %v for a 1h timeout, want the safe time %v", d, ok, h.SafeUntil)
		}
		if _, ok := k.Deadline(store.Lease{Courier: "job", ProjectID: p1, Holder: "me", Fence: h.Fence - 1}, time.Hour); ok {
			t.Fatal("a deadline under an old fence")
		}
		lctx, cancel := k.Context(ctx, h.Lease)
		defer cancel()
		if err := st.ReleaseLeases(ctx, "job", "other", []string{p2}); err != nil {
			t.Fatal(err)
		}
		waitHeld(t, k, "p2's lease after its release", holds(p2))
		if lctx.Err() != nil {
			t.Fatalf("the lease context ended while the lease is renewed: %v", context.Cause(lctx))
		}
		// A crash: the keeper stops without releasing (its context's
		// store calls fail); the restarted holder reclaims.
		st.noRelease.Store(true)
		stop()
		st.noRelease.Store(false)
		waitDone(t, lctx, "the lease context to end with the keeper")
		k2 := lease.New(st, lease.Options{Name: "job", Holder: &lease.Identity{ID: "me", Reclaim: true}, TTL: time.Hour,
			Wanted: func(context.Context) ([]string, error) { return []string{p1, p2}, nil }})
		run(t, k2.Run)
		set := waitHeld(t, k2, "both leases reclaimed", func(s lease.Set) bool { return len(s) == 2 })
		if got, _ := set.Find(p1); got.Fence != h.Fence+1 {
			t.Fatalf("reclaimed p1 under fence %d, want %d", got.Fence, h.Fence+1)
		}
		if err := st.AdvanceCursor(ctx, h.Lease, "t", 1); err == nil {
			t.Fatal("the dead process's write was accepted after the reclaim")
		}
	})
}

// TestSingleRunsWorkOnOneHolder, on fake time (testing/synctest, the
// store opened in the bubble): of two processes, only the holder of a
// relay-wide job runs it, through five renewal intervals; when the
// holder stops, the other takes over at its next renewal interval (the
// stopped one released the lease).
func TestSingleRunsWorkOnOneHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := teststore.SQLite(t)
		var running atomic.Int32
		started := make(chan int, 2)
		work := func(i int) func(ctx context.Context) error {
			return func(ctx context.Context) error {
				if n := running.Add(1); n != 1 {
					t.Errorf("%d holders run the job at once", n)
				}
				started <- i
				<-ctx.Done()
				running.Add(-1)
				return nil
			}
		}
		// A real minute in the database (its clock is real), a few
		// seconds at most of real time for the test.
		const ttl = time.Minute
		var stops [2]func()
		for i := range 2 {
			s := lease.NewSingle(st, lease.Options{Name: "matrix-sync", Holder: &lease.Identity{ID: string(rune('a' + i))}, TTL: ttl})
			stops[i] = run(t, func(ctx context.Context) error { s.RunDo(ctx, work(i)); return nil })
		}
		synctest.Wait()
		var first int
		select {
		case first = <-started:
		default:
			t.Fatal("neither process runs the job")
		}
		time.Sleep(5 * ttl / 3) // fake time: five renewal intervals in which the other must not start it
		synctest.Wait()
		select {
		case <-started:
			t.Fatal("both processes ran the job")
		default:
		}
		if running.Load() != 1 {
			t.Fatal("the holder stopped running the job while it holds the lease")
		}
		stops[first]()
		time.Sleep(ttl / 3) // fake time: the other's next renewal interval
		synctest.Wait()
		select {
		case i := <-started:
			if i != 1-first {
				t.Fatalf("process %d ran the job again after it stopped", i)
			}
		default:
			t.Fatalf("the other process did not take the job over within a renewal interval (%v)", ttl/3)
		}
	})
}

type countingStore struct {
	store.Store
	acquires  atomic.Int64
	noRelease atomic.Bool
}

func (c *countingStore) AcquireLeases(ctx context.Context, courier, holder string, ids []string, ttl time.Duration) ([]store.Lease, error) {
	c.acquires.Add(1)
	return c.Store.AcquireLeases(ctx, courier, holder, ids, ttl)
}

func (c *countingStore) ReleaseLeases(ctx context.Context, courier, holder string, ids []string) error {
	if c.noRelease.Load() {
		return nil // the process died before releasing
	}
	return c.Store.ReleaseLeases(ctx, courier, holder, ids)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestWantChecksOncePerInterval: advances naming a project without work
// (no targets) cost one Check per renewal interval, not one per advance;
// after an interval they cost one more; a forced Want (a new target)
// checks at once. On fake time (synctest): each Want is handled before
// the next is sent.
func TestWantChecksOncePerInterval(t *testing.T) {
	st := teststore.SQLite(t) // opened outside the bubble: its goroutines are not the test's
	p := must(st.CreateProject(context.Background(), storetest.NewUUID())).ID
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Hour
		var checks atomic.Int32
		var hasWork atomic.Bool
		k := lease.New(st, lease.Options{Name: "job", Holder: &lease.Identity{ID: "me"}, TTL: ttl,
			Wanted: func(context.Context) ([]string, error) { return nil, nil },
			Check: func(context.Context, string) bool {
				checks.Add(1)
				return hasWork.Load()
			}})
		run(t, k.Run)
		for range 50 {
			k.Want(p, false)
			synctest.Wait()
		}
		if n := checks.Load(); n != 1 {
			t.Fatalf("%d Checks for 50 advances within one interval, want 1", n)
		}
		time.Sleep(ttl / 3) // fake time: one renewal interval
		for range 5 {
			k.Want(p, false)
			synctest.Wait()
		}
		if n := checks.Load(); n != 2 {
			t.Fatalf("%d Checks after one more interval, want 2", n)
		}
		hasWork.Store(true)
		k.Want(p, true)
		synctest.Wait()
		if n := checks.Load(); n != 3 {
			t.Fatalf("%d Checks after a forced Want, want 3", n)
		}
		waitHeld(t, k, "the lease after a forced Want", holds(p))
	})
}

// TestKeeperTakesLapsedLeaseAtOnce: a lease whose holder died (it stopped
// renewing) is taken when it lapses, not at the keeper's next interval
// after that: with a 6 s lease (intervals of 2 s) and another holder's
// lease lapsing 3 s after the keeper starts, the keeper holds it within
// 700 ms of the lapse (at its next interval it would be 1 s late), and
// never before.
func TestKeeperTakesLapsedLeaseAtOnce(t *testing.T) {
	st := teststore.SQLite(t)
	ctx := context.Background()
	p := must(st.CreateProject(ctx, storetest.NewUUID())).ID
	const left = 3 * time.Second
	start := time.Now()
	if _, err := st.AcquireLeases(ctx, "job", "dead", []string{p}, left); err != nil {
		t.Fatal(err)
	}
	lapses := start.Add(left)
	k := lease.New(st, lease.Options{Name: "job", Holder: &lease.Identity{ID: "me"}, TTL: 6 * time.Second,
		Wanted: func(context.Context) ([]string, error) { return []string{p}, nil }})
	run(t, k.Run)
	waitHeld(t, k, "the lapsed lease", holds(p))
	took := time.Now()
	if took.Before(lapses) {
		t.Fatalf("took the lease %v before it lapsed", lapses.Sub(took))
	}
	if late := took.Sub(lapses); late > 700*time.Millisecond {
		t.Fatalf("took the lease %v after it lapsed, want ≤ 700ms", late)
	}
	t.Logf("taken %v after the lapse", took.Sub(lapses).Round(time.Millisecond))
}
