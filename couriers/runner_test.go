package couriers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// engines runs fn on SQLite and, when ACRELAY_TEST_DATABASE_URL is set, on
// PostgreSQL.
func engines(t *testing.T, fn func(t *testing.T, open func(t *testing.T) store.Store)) {
	teststore.Engines(t, func(t *testing.T, open teststore.Open) { fn(t, open) })
}

// recorder is a courier with fixed targets per project that records what
// it was handed. hook, when set, runs first in each Deliver and may fail it
// or block.
type recorder struct {
	name    string
	targets []couriers.Target
	st      store.Feed

	mu       sync.Mutex
	got      []string
	attempts map[string]int
	hook     func(ctx context.Context, projectID string, t couriers.Target) error
	projects atomic.Int64 // Projects calls
}

func newRecorder(st store.Feed, ids ...string) *recorder {
	r := &recorder{name: "recorder", st: st, attempts: map[string]int{}}
	for _, id := range ids {
		r.targets = append(r.targets, couriers.Target{ID: id, Host: "host-" + id})
	}
	return r
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Projects(ctx context.Context) ([]string, error) {
	r.projects.Add(1)
	return couriers.Export{Feed: r.st}.Projects(ctx)
}
func (r *recorder) Targets(context.Context, string) ([]couriers.Target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]couriers.Target(nil), r.targets...), nil
}
func (r *recorder) Deliver(ctx context.Context, projectID string, t couriers.Target, recs []store.Record) error {
	r.mu.Lock()
	r.attempts[t.ID]++
	hook := r.hook
	r.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, projectID, t); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		r.got = append(r.got, t.ID+":"+rec.EventID)
	}
	return nil
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) count(prefix string) int {
	n := 0
	for _, g := range r.snapshot() {
		if strings.HasPrefix(g, prefix) {
			n++
		}
	}
	return n
}

func (r *recorder) attemptsOf(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[id]
}

// waitRefreshes waits until the courier's projects were listed n more
// times: by then the runner has gone through whole keeper iterations.
func (r *recorder) waitRefreshes(t *testing.T, n int64) {
	t.Helper()
	want := r.projects.Load() + n
	waitFor(t, fmt.Sprintf("%d project listings", n), func() bool { return r.projects.Load() >= want })
}

func appendN(t *testing.T, st store.Store, s *storetest.Signer, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		ev, canonical := s.Event(t, storetest.Spec{RepositoryID: "repo-" + string(rune('a'+i%3))})
		if _, err := st.Append(context.Background(), ev, canonical); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func start(t *testing.T, r *couriers.Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func newProject(t *testing.T, st store.Store) *storetest.Signer {
	t.Helper()
	p, err := st.CreateProject(context.Background(), storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	return storetest.NewSigner(t, p.ID).Register(t, st)
}

func cursorOf(t *testing.T, st store.Store, courier, projectID, target string) int64 {
	t.Helper()
	states, err := st.TargetStates(context.Background(), courier, projectID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Target == target {
			return s.ReceivedSeq
		}
	}
	return 0
}

var fast = couriers.Backoff{Initial: 20 * time.Millisecond, Max: 50 * time.Millisecond}

func TestRunnerDeliversEveryRecordToEveryTargetOnce(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		s := newProject(t, st)
		ids := appendN(t, st, s, 250) // more than one batch, three repositories

		rec := newRecorder(st, "a", "b")
		failed := atomic.Bool{}
		rec.hook = func(context.Context, string, couriers.Target) error {
			if failed.CompareAndSwap(false, true) {
				return errors.New("receiver down")
			}
			return nil
		}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h1", LeaseTTL: time.Second, Batch: 100, Backoff: fast})
		stop := start(t, r)
		waitFor(t, "500 deliveries", func() bool { return len(rec.snapshot()) == 500 })

		// New records arrive by the store's advance, without any poke.
		more := appendN(t, st, s, 5)
		waitFor(t, "the new records", func() bool { return len(rec.snapshot()) == 510 })
		waitFor(t, "status caught up", func() bool { return r.Status().Behind == 0 })
		if got := r.Status(); got.Projects != 1 || got.Targets != 2 || got.Failing != 0 || got.LastError != "receiver down" {
			t.Fatalf("status %+v", got)
		}
		stop()

		want := map[string]int{}
		for _, id := range append(ids, more...) {
			want["a:"+id], want["b:"+id] = 1, 1
		}
		got := rec.snapshot()
		for _, g := range got {
			want[g]--
		}
		for k, v := range want {
			if v != 0 {
				t.Fatalf("%s delivered %d times too few", k, v)
			}
		}
		var seqA []string
		for _, g := range got {
			if id, ok := strings.CutPrefix(g, "a:"); ok {
				seqA = append(seqA, id)
			}
		}
		if strings.Join(seqA, ",") != strings.Join(append(ids, more...), ",") {
			t.Fatal("target a did not receive records in receipt order")
		}
		for _, target := range []string{"a", "b"} {
			if cur := cursorOf(t, st, "recorder", s.ProjectID, target); cur != 255 {
				t.Fatalf("cursor %s = %d; want 255", target, cur)
			}
		}
		// Run released its lease: another holder takes it at once.
		if ls, err := st.AcquireLeases(context.Background(), "recorder", "h2", []string{s.ProjectID}, time.Second); err != nil || len(ls) != 1 {
			t.Fatalf("lease not released on stop: %v %v", ls, err)
		}
	})
}

func TestOnlyTheLeaseHolderDelivers(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		ctx := context.Background()
		s := newProject(t, st)
		appendN(t, st, s, 20)
		// Another process holds the lease.
		if ls, err := st.AcquireLeases(ctx, "recorder", "other", []string{s.ProjectID}, time.Hour); err != nil || len(ls) != 1 {
			t.Fatal("could not take the lease")
		}
		rec := newRecorder(st, "a", "b")
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "me", LeaseTTL: 300 * time.Millisecond, Refresh: 20 * time.Millisecond})
		start(t, r)
		rec.waitRefreshes(t, 2) // whole keeper iterations: it tried the lease
		if n := len(rec.snapshot()); n != 0 || r.Status().Projects != 0 {
			t.Fatalf("delivered %d records without the lease (status %+v)", n, r.Status())
		}
		// The holder releases: this runner takes over from the durable cursor.
		if err := st.ReleaseLeases(ctx, "recorder", "other", []string{s.ProjectID}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "takeover", func() bool { return len(rec.snapshot()) == 40 })
	})
}

// TestSlowTargetsDoNotDelayOthers: targets that never answer, on one
// project and on another, hold neither the fast target's deliveries nor
// more than their share of the limits: total and per-host concurrency stay
// within their bounds while they hang.
func TestSlowTargetsDoNotDelayOthers(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		p1, p2 := newProject(t, st), newProject(t, st)
		rec := newRecorder(st, "fast", "slow1", "slow2", "slow3")
		for i := range rec.targets[1:] {
			rec.targets[1+i].Host = "dead.example" // one host
		}
		var inflight, peak, deadPeak, dead atomic.Int64
		release := make(chan struct{})
		rec.hook = func(ctx context.Context, _ string, tg couriers.Target) error {
			n := inflight.Add(1)
			defer inflight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if tg.ID == "fast" {
				return nil
			}
			d := dead.Add(1)
			defer dead.Add(-1)
			for p := deadPeak.Load(); d > p && !deadPeak.CompareAndSwap(p, d); p = deadPeak.Load() {
			}
			select { // never answers (until the test ends)
			case <-release:
			case <-ctx.Done():
			}
			return errors.New("no answer")
		}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: 3 * time.Second, Concurrency: 3,
			HostLimit: func(h string) int {
				if h == "dead.example" {
					return 2
				}
				return 4
			}, DeliveryTimeout: time.Hour})
		stop := start(t, r)
		defer func() { close(release); stop() }()
		for round := 1; round <= 5; round++ {
			appendN(t, st, p1, 3)
			appendN(t, st, p2, 3)
			waitFor(t, fmt.Sprintf("round %d to the fast target", round), func() bool { return rec.count("fast:") == 6*round })
		}
		waitFor(t, "the dead host's two slots taken", func() bool { return dead.Load() == 2 })
		if got := deadPeak.Load(); got != 2 {
			t.Fatalf("%d deliveries in flight to one host, limit 2", got)
		}
		if got := peak.Load(); got > 3 {
			t.Fatalf("%d deliveries in flight, limit 3", got)
		}
		// Each of the 3 hanging targets of both projects is 15 records behind.
		waitFor(t, "status: 90 records behind over 8 targets", func() bool {
			st := r.Status()
			return st.Behind == 3*2*15 && st.Targets == 8
		})
	})
}

// TestBackoffIsDurable, on fake time (testing/synctest): a target's
// backoff survives a restart: the next process neither hammers the dead
// target nor forgets it, and retries it when the backoff the first one
// recorded ends. (SQLite: the durable state is the store suite's on both
// engines; what is tested here is the Runner's use of it.)
func TestBackoffIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := teststore.SQLite(t)
		s := newProject(t, st)
		appendN(t, st, s, 3)
		rec := newRecorder(st, "dead")
		rec.hook = func(context.Context, string, couriers.Target) error { return errors.New("connection refused") }
		hour := couriers.Backoff{Initial: time.Hour, Max: 2 * time.Hour}
		opts := couriers.Options{Holder: "first", LeaseTTL: time.Minute, Backoff: hour}
		stop := start(t, couriers.NewRunner(st, rec, opts))
		synctest.Wait() // the first attempt has failed and its failure is recorded
		if n := rec.attemptsOf("dead"); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
		states, err := st.TargetStates(context.Background(), "recorder", s.ProjectID)
		if err != nil || len(states) != 1 {
			t.Fatalf("target states %v, %v", states, err)
		}
		state := states[0]
		if state.Failures != 1 || state.RetryIn < 29*time.Minute || state.RetryIn > time.Hour || state.LastError != "connection refused" || state.ReceivedSeq != 0 {
			t.Fatalf("state %+v: want one failure, retry in 30–60 min", state)
		}
		stop()

		opts.Holder = "second"
		r2 := couriers.NewRunner(st, rec, opts)
		start(t, r2)
		synctest.Wait()
		if got := r2.Status(); got.Projects != 1 || got.Failing != 1 || got.Behind != 3 {
			t.Fatalf("restarted runner's status %+v: want the project, failing, 3 behind", got)
		}
		// The second runner read what is left of the backoff a little
		// later by the database's real clock than the state above: a
		// minute's margin on each side covers any machine.
		time.Sleep(state.RetryIn - time.Minute) // fake time: the backoff but its last minute
		if n := rec.attemptsOf("dead"); n != 1 {
			t.Fatalf("restarted runner attempted %d deliveries during the backoff", n)
		}
		time.Sleep(2 * time.Minute) // fake time: past the recorded retry time
		synctest.Wait()
		if n := rec.attemptsOf("dead"); n != 2 {
			t.Fatalf("%d attempts once the recorded backoff ended, want 2", n)
		}
	})
}

// TestRetriesWaitTheirBackoff, on fake time (testing/synctest): a target
// that keeps failing is retried when each backoff ends — never before its
// floor, never after its ceiling — the ceiling doubling from Initial up to
// Max; a target whose courier names the wait (RetryAfterError) is retried
// exactly that long after each failure; a target that delivers is not
// held up by either. The due-heap keeps the two waiting targets apart,
// each on its own due times.
func TestRetriesWaitTheirBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := teststore.SQLite(t)
		s := newProject(t, st)
		appendN(t, st, s, 2)
		rec := newRecorder(st, "down", "paced", "up")
		var mu sync.Mutex
		attempts := map[string][]time.Time{}
		const retryAfter = 90 * time.Second
		rec.hook = func(_ context.Context, _ string, tg couriers.Target) error {
			mu.Lock()
			attempts[tg.ID] = append(attempts[tg.ID], time.Now())
			mu.Unlock()
			switch tg.ID {
			case "down":
				return errors.New("connection refused")
			case "paced":
				return &couriers.RetryAfterError{After: retryAfter, Err: errors.New("429 too many requests")}
			}
			return nil
		}
		b := couriers.Backoff{Initial: time.Minute, Max: 4 * time.Minute}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: time.Minute, Backoff: b})
		t0 := time.Now()
		stop := start(t, r)
		const window = 29 * time.Minute
		time.Sleep(window) // fake time
		end := time.Now()
		stop()

		mu.Lock()
		defer mu.Unlock()
		// The store keeps the time of the next attempt by the database's
		// real clock and reports what is left of it, in milliseconds, a
		// moment after writing it: a retry may come early by the real
		// time between the two statements (tens of milliseconds under
		// -race on a loaded machine), never late but for rounding.
		const slack, rounding = time.Second, time.Millisecond
		if up := attempts["up"]; len(up) != 1 || up[0].Sub(t0) > time.Second || rec.count("up:") != 2 {
			t.Fatalf("the delivering target: attempts at %v, %d records; want one attempt at the start, 2 records", up, rec.count("up:"))
		}
		down := attempts["down"]
		if len(down) < 2 || down[0].Sub(t0) > time.Second {
			t.Fatalf("the failing target's attempts %v: want the first at the start, then retries", down)
		}
		for i := 1; i < len(down); i++ {
			ceiling := min(b.Initial<<(i-1), b.Max)
			if d := down[i].Sub(down[i-1]); d < ceiling/2-slack || d > ceiling+rounding {
				t.Fatalf("retry %d of the failing target came %v after the failure, want within [%v, %v]", i, d, ceiling/2, ceiling)
			}
		}
		if last := end.Sub(down[len(down)-1]); last > b.Max {
			t.Fatalf("no retry in the last %v of the window, want one at least every %v", last, b.Max)
		}
		paced := attempts["paced"]
		if want := 1 + int(window/retryAfter); len(paced) != want {
			t.Fatalf("the paced target was attempted %d times in %v, want %d (one every %v)", len(paced), window, want, retryAfter)
		}
		for i := 1; i < len(paced); i++ {
			if d := paced[i].Sub(paced[i-1]); d < retryAfter-slack || d > retryAfter+rounding {
				t.Fatalf("retry %d of the paced target came %v after the failure, want %v", i, d, retryAfter)
			}
		}
		t.Logf("in %v of fake time: %d attempts of the failing target, %d of the paced one", window, len(down), len(paced))
	})
}

// faultyStore is a real store whose lease renewals can be made to fail:
// the edge where a process loses its lease.
type faultyStore struct {
	store.Store
	failRenew atomic.Bool  // lease renewals and acquisitions fail (a partitioned process)
	writes    atomic.Int64 // courier write transactions (each method is one)
	acquires  atomic.Int64 // AcquireLeases calls
}

func (f *faultyStore) RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	f.writes.Add(1)
	if f.failRenew.Load() {
		return nil, fmt.Errorf("renew: %w", store.ErrUnavailable)
	}
	return f.Store.RenewLeases(ctx, courier, holder, ttl)
}
func (f *faultyStore) AcquireLeases(ctx context.Context, courier, holder string, ids []string, ttl time.Duration) ([]store.Lease, error) {
	f.writes.Add(1)
	f.acquires.Add(1)
	if f.failRenew.Load() {
		return nil, fmt.Errorf("acquire: %w", store.ErrUnavailable)
	}
	return f.Store.AcquireLeases(ctx, courier, holder, ids, ttl)
}
func (f *faultyStore) ReleaseLeases(ctx context.Context, courier, holder string, ids []string) error {
	f.writes.Add(1)
	return f.Store.ReleaseLeases(ctx, courier, holder, ids)
}
func (f *faultyStore) AdvanceCursor(ctx context.Context, l store.Lease, target string, seq int64) error {
	f.writes.Add(1)
	return f.Store.AdvanceCursor(ctx, l, target, seq)
}
func (f *faultyStore) AdvanceCursors(ctx context.Context, l store.Lease, adv []store.CursorAdvance) error {
	f.writes.Add(1)
	return f.Store.AdvanceCursors(ctx, l, adv)
}
func (f *faultyStore) RecordFailure(ctx context.Context, l store.Lease, target string, d time.Duration, msg string) (store.TargetState, error) {
	f.writes.Add(1)
	return f.Store.RecordFailure(ctx, l, target, d, msg)
}
func (f *faultyStore) ForgetTarget(ctx context.Context, courier, projectID, target string) error {
	f.writes.Add(1)
	return f.Store.ForgetTarget(ctx, courier, projectID, target)
}

// TestLostLeaseStopsDelivery: a process whose lease lapsed (its renewals
// fail) has its in-flight delivery cancelled, sends nothing more and can
// no longer move the cursor; the process that takes the lease over
// delivers from the durable cursor.
func TestLostLeaseStopsDelivery(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := &faultyStore{Store: open(t)}
		s := newProject(t, st)
		appendN(t, st, s, 5)
		rec := newRecorder(st, "a")
		entered, cancelled := make(chan struct{}), make(chan struct{})
		var once sync.Once
		rec.hook = func(ctx context.Context, _ string, _ couriers.Target) error {
			first := false
			once.Do(func() { first = true })
			if !first {
				return nil
			}
			close(entered)
			<-ctx.Done() // hangs until the runner gives the lease up
			close(cancelled)
			return ctx.Err()
		}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "old", LeaseTTL: 600 * time.Millisecond, Refresh: 20 * time.Millisecond, Backoff: fast})
		start(t, r)
		<-entered
		st.failRenew.Store(true)
		select {
		case <-cancelled:
		case <-time.After(20 * time.Second):
			t.Fatal("the delivery was not cancelled after the lease lapsed")
		}
		// The lease lapses by the database clock; another process takes it.
		var lease store.Lease
		waitFor(t, "the takeover", func() bool {
			ls, err := st.Store.AcquireLeases(context.Background(), "recorder", "new", []string{s.ProjectID}, time.Hour)
			if err == nil && len(ls) == 1 {
				lease = ls[0]
			}
			return err == nil && len(ls) == 1
		})
		rec.waitRefreshes(t, 3)
		if n := rec.attemptsOf("a"); n != 1 || len(rec.snapshot()) != 0 {
			t.Fatalf("the old holder went on delivering: %d attempts, %d records", n, len(rec.snapshot()))
		}
		if cur := cursorOf(t, st, "recorder", s.ProjectID, "a"); cur != 0 {
			t.Fatalf("cursor moved to %d", cur)
		}
		// The new holder's writes are accepted; the old one's are not.
		if err := st.AdvanceCursor(context.Background(), lease, "a", 2); err != nil {
			t.Fatal(err)
		}
		old := lease
		old.Holder, old.Fence = "old", lease.Fence-1
		if err := st.AdvanceCursor(context.Background(), old, "a", 5); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("old holder's advance: %v, want ErrLeaseLost", err)
		}
	})
}

// TestTargetGoneIsForgotten: ErrTargetGone forgets the target's state.
func TestTargetGoneIsForgotten(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		s := newProject(t, st)
		appendN(t, st, s, 2)
		rec := newRecorder(st, "gone", "kept")
		rec.hook = func(_ context.Context, _ string, tg couriers.Target) error {
			if tg.ID == "gone" {
				rec.mu.Lock()
				rec.targets = rec.targets[1:] // the courier removed it
				rec.mu.Unlock()
				return fmt.Errorf("callback answered 410: %w", couriers.ErrTargetGone)
			}
			return nil
		}
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: time.Second, Backoff: fast})
		start(t, r)
		waitFor(t, "the kept target", func() bool { return rec.count("kept:") == 2 })
		waitFor(t, "the gone target dropped", func() bool { return r.Status().Targets == 1 })
		waitFor(t, "the kept target's cursor, and no state of the gone one", func() bool {
			states, err := st.TargetStates(context.Background(), "recorder", s.ProjectID)
			return err == nil && len(states) == 1 && states[0].Target == "kept" && states[0].ReceivedSeq == 2
		})
		if n := rec.attemptsOf("gone"); n != 1 {
			t.Fatalf("the gone target was attempted %d times", n)
		}
	})
}

// TestIdleRunnersWriteByLeasesNotProjects, on fake time (testing/
// synctest): with 1,000 projects, three couriers and nothing appended,
// the store's write transactions per second are bounded by the lease
// renewals (one per courier per third of the lease), not by the number
// of projects. SQLite: on PostgreSQL the same bound is
// TestIdleHoldersOnPostgresWriteByLeases's, with three processes.
func TestIdleRunnersWriteByLeasesNotProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 1,000 projects")
	}
	synctest.Test(t, func(t *testing.T) {
		st := &faultyStore{Store: teststore.SQLite(t)}
		const projects = 1000
		for range projects {
			if _, err := st.CreateProject(context.Background(), storetest.NewUUID()); err != nil {
				t.Fatal(err)
			}
		}
		// A renewal every 20 minutes of fake time. The database's lease
		// expiry is its real clock, and the fake clock stands still while
		// the runners take and load 3,000 leases: an hour outlasts that on
		// any machine. Projects are listed and reloaded only at the start
		// (Refresh), as with the default 30 s in a 6 s window.
		const ttl = time.Hour
		var runners []*couriers.Runner
		for _, name := range []string{"export", "websub", "matrix"} {
			rec := newRecorder(st, "t")
			rec.name = name
			r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: ttl, Refresh: 24 * time.Hour})
			runners = append(runners, r)
			start(t, r)
		}
		synctest.Wait() // every lease taken, every project loaded
		for _, r := range runners {
			if s := r.Status(); s.Projects != projects || s.Targets != projects {
				t.Fatalf("status %+v: want every lease held, every target loaded", s)
			}
		}
		before, t0 := st.writes.Load(), time.Now()
		time.Sleep(ttl) // fake time: the measured window, idle
		synctest.Wait() // the renewals due at its last instant are done
		writes, window := st.writes.Load()-before, time.Since(t0)
		bound := 3 * (window.Seconds()/(ttl/3).Seconds() + 1) // one renewal per courier per interval
		t.Logf("idle: %d courier write transactions in %v for %d projects × 3 couriers; bound %.0f", writes, window, projects, bound)
		if float64(writes) > bound {
			t.Fatalf("%d write transactions in %v, want at most %.0f (one renewal per courier per %v)", writes, window, bound, ttl/3)
		}
		if writes == 0 {
			t.Fatal("no renewals at all: the leases would lapse")
		}
	})
}

func TestBackoffWait(t *testing.T) {
	b := couriers.Backoff{Initial: time.Second, Max: time.Minute}
	for _, tc := range []struct {
		n        int
		min, max time.Duration
	}{
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{4, 4 * time.Second, 8 * time.Second},
		{7, 30 * time.Second, time.Minute},
		{100, 30 * time.Second, time.Minute},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Wait(tc.n)
			if d < tc.min || d > tc.max {
				t.Fatalf("Wait(%d) = %v, want within [%v, %v]", tc.n, d, tc.min, tc.max)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Fatalf("Wait(%d) took %d distinct values in 200 draws: no jitter", tc.n, len(seen))
		}
	}
}

func TestExportWritesRecordJSONLines(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		ctx := context.Background()
		s := newProject(t, st)
		ids := appendN(t, st, s, 3)
		dir := t.TempDir()
		exp := couriers.Export{Dir: dir, Feed: st}
		if ps, err := exp.Projects(ctx); err != nil || len(ps) != 1 || ps[0] != s.ProjectID {
			t.Fatalf("projects %v %v", ps, err)
		}
		recs, err := st.RecordsAfter(ctx, s.ProjectID, 0, 10)
		if err != nil || len(recs) != 3 {
			t.Fatalf("RecordsAfter: %d, %v", len(recs), err)
		}
		if err := exp.Deliver(ctx, s.ProjectID, couriers.Target{}, recs); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, s.ProjectID+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if len(lines) != 3 {
			t.Fatalf("%d lines", len(lines))
		}
		for i, line := range lines {
			if !bytes.Equal(line, recs[i].ImmutableJSON()) || !bytes.Contains(line, []byte(ids[i])) {
				t.Errorf("line %d = %s", i, line)
			}
		}
		if err := exp.Deliver(ctx, "../escape", couriers.Target{}, recs); err == nil {
			t.Fatal("a non-UUID project id became a path")
		}
	})
}

// TestRetryResendsTheFailedBatch: after a failure the courier is handed
// exactly the batch that failed, even when records arrived meanwhile, so
// a retried delivery is the same bytes; the new records follow.
func TestRetryResendsTheFailedBatch(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		s := newProject(t, st)
		first := appendN(t, st, s, 3)
		rec := newRecorder(st, "a")
		var mu sync.Mutex
		var batches [][]string
		r := couriers.NewRunner(st, &batchRecorder{recorder: rec, record: func(ids []string) error {
			mu.Lock()
			defer mu.Unlock()
			batches = append(batches, ids)
			if len(batches) == 1 {
				appendN(t, st, s, 2) // arrive while the first attempt fails
				return errors.New("callback answered 503")
			}
			return nil
		}}, couriers.Options{Holder: "h", LeaseTTL: time.Second, Backoff: fast})
		start(t, r)
		waitFor(t, "three batches", func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 3 })
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(batches[0]) != fmt.Sprint(first) || fmt.Sprint(batches[1]) != fmt.Sprint(first) || len(batches[2]) != 2 {
			t.Fatalf("batches %v, want the first three twice, then the two new ones", batches)
		}
	})
}

// batchRecorder hands each batch's event ids to record.
type batchRecorder struct {
	*recorder
	record func(ids []string) error
}

func (b *batchRecorder) Deliver(ctx context.Context, projectID string, t couriers.Target, recs []store.Record) error {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.EventID)
	}
	return b.record(ids)
}

// countingStore counts RecordsAfter reads.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error) {
	c.reads.Add(1)
	return c.Store.RecordsAfter(ctx, projectID, after, limit)
}

// TestFanOutSharesBatches: targets at the same cursor share one read of
// the batch after it (a fan-out costs a few reads, not one per target),
// and each still gets every record once, in order.
func TestFanOutSharesBatches(t *testing.T) {
	st := &countingStore{Store: teststore.SQLite(t)}
	s := newProject(t, st)
	var ids []string
	for i := range 40 {
		ids = append(ids, fmt.Sprintf("t%02d", i))
	}
	rec := newRecorder(st, ids...)
	r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: 3 * time.Second, Concurrency: 8})
	start(t, r)
	waitFor(t, "the lease", func() bool { return r.Status().Targets == 40 })
	before := st.reads.Load()
	want := appendN(t, st, s, 5)
	waitFor(t, "every target's 5 records", func() bool { return len(rec.snapshot()) == 40*5 })
	// Without sharing: at least one read per target and wave.
	if n := st.reads.Load() - before; n >= 40 {
		t.Fatalf("%d RecordsAfter reads for 40 targets at one cursor", n)
	} else {
		t.Logf("%d RecordsAfter reads for a fan-out of 5 records to 40 targets", n)
	}
	for _, id := range ids {
		var got []string
		for _, g := range rec.snapshot() {
			if e, ok := strings.CutPrefix(g, id+":"); ok {
				got = append(got, e)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("target %s got %v", id, got)
		}
	}
}

// failingRecorder is a recorder that is also a couriers.FailingReporter.
type failingRecorder struct {
	*recorder
	reports atomic.Int64
}

func (f *failingRecorder) TargetFailing(context.Context, string, couriers.Target, time.Time) {
	f.reports.Add(1)
}

// TestFailingReportedForEachRunOfFailures: a target that fails past
// GiveUp, recovers, delivers, and fails past GiveUp again is reported
// twice — also when one worker delivered the batch in between and failed
// the next, so no successful result came back between the two runs.
func TestFailingReportedForEachRunOfFailures(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		s := newProject(t, st)
		appendN(t, st, s, 3)
		f := &failingRecorder{recorder: newRecorder(st, "a")}
		var delivered atomic.Int64
		// Batches of one: record 1 fails until the first report, record 2
		// goes through, record 3 fails until the second report.
		f.hook = func(context.Context, string, couriers.Target) error {
			switch n := delivered.Load(); {
			case n == 0 && f.reports.Load() < 1, n == 2 && f.reports.Load() < 2:
				return errors.New("callback answered 503")
			}
			delivered.Add(1)
			return nil
		}
		r := couriers.NewRunner(st, f, couriers.Options{Holder: "h", LeaseTTL: time.Second, Batch: 1,
			Backoff: couriers.Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, GiveUp: 100 * time.Millisecond}})
		start(t, r)
		waitFor(t, "all three records delivered", func() bool { return delivered.Load() == 3 })
		if n := f.reports.Load(); n != 2 {
			t.Fatalf("%d failing reports, want 2", n)
		}
	})
}

// slowTargets is a recorder whose Targets blocks for one project once
// blocked is set, until release is closed: a store read that hangs.
type slowTargets struct {
	*recorder
	blocked atomic.Value // project id
	entered chan struct{}
	release chan struct{}
}

func (s *slowTargets) Targets(ctx context.Context, projectID string) ([]couriers.Target, error) {
	if id, _ := s.blocked.Load().(string); id == projectID {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.recorder.Targets(ctx, projectID)
}

// A project's load that hangs (its Targets read) delays only that load:
// the other project's new records are delivered meanwhile. Before the
// loader, the scheduling loop made the read itself and stopped.
func TestSlowLoadDoesNotStallDispatch(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) {
		st := open(t)
		a, b := newProject(t, st), newProject(t, st)
		slow := &slowTargets{recorder: newRecorder(st, "x"), entered: make(chan struct{}, 1), release: make(chan struct{})}
		r := couriers.NewRunner(st, slow, couriers.Options{Holder: "h1", LeaseTTL: 2 * time.Second, Backoff: fast})
		start(t, r)
		appendN(t, st, a, 1)
		appendN(t, st, b, 1)
		waitFor(t, "one record to each project", func() bool { return len(slow.snapshot()) == 2 })

		slow.blocked.Store(a.ProjectID)
		r.Refresh(a.ProjectID)
		select {
		case <-slow.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("project a was not reloaded after Refresh")
		}
		more := appendN(t, st, b, 3)
		waitFor(t, "b's new records while a's load hangs", func() bool { return slow.count("x:"+more[2]) == 1 })
		close(slow.release)
		if got := len(slow.snapshot()); got != 5 {
			t.Fatalf("%d deliveries, want 5: %v", got, slow.snapshot())
		}
	})
}

// A fan-out to 2,000 targets (each on its own host) starts at most
// 4 × Concurrency (at least 64) workers at once, not one goroutine per
// target waiting for a slot; every target is still delivered to. In a
// synctest bubble, so that "the scheduler has started all it will" is
// synctest.Wait, not a guess at how long that takes.
func TestFanOutStartsBoundedWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := teststore.SQLite(t)
		s := newProject(t, st)
		const n = 2000
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("t%04d", i)
		}
		rec := newRecorder(st, ids...)
		release := make(chan struct{})
		var inFlight atomic.Int64
		rec.hook = func(ctx context.Context, _ string, _ couriers.Target) error {
			inFlight.Add(1)
			defer inFlight.Add(-1)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		base := runtime.NumGoroutine()
		r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h1", LeaseTTL: time.Minute, Concurrency: 4, Backoff: fast})
		start(t, r)
		appendN(t, st, s, 1)
		synctest.Wait() // the scheduler has started all it will
		if got := inFlight.Load(); got != 4 {
			t.Fatalf("%d deliveries in flight, want Concurrency 4", got)
		}
		if grown := runtime.NumGoroutine() - base; grown > 64+40 {
			t.Fatalf("%d goroutines more than before the runner, want ≤ 64 workers + 40", grown)
		}
		close(release)
		synctest.Wait()
		if got := len(rec.snapshot()); got != n {
			t.Fatalf("%d targets delivered to, want %d; status %+v", got, n, r.Status())
		}
	})
}
