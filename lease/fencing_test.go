package lease_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/lease"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// fencingChecks is the number of scenarios TestFencingInvariant runs per
// engine unless -rapid.checks says otherwise: each runs on the database's
// real clock for about a second.
const fencingChecks = 8

// TestFencingInvariant is the fencing invariant as a property (package
// doc): whatever the holders do — start, stop, crash without releasing
// and restart with the same identity (reclaim), want a lease, see their
// store calls delayed past the call timeout — and however their local
// clocks are offset or run fast or slow (within the margin's allowance:
// rates 0.8–1.25), no two holders of one lease ever have overlapping
// safe times. A holder's safe time for a fence runs from the real instant
// the store call that granted it returned to the latest safe time it
// published for it (converted from its clock to real time), cut at the
// instant it was stopped. Real store (SQLite, and PostgreSQL when
// ACRELAY_TEST_DATABASE_URL is set): expiry is the database's clock.
func TestFencingInvariant(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && !flagSet("rapid.checks") {
		old := f.Value.String()
		_ = f.Value.Set(fmt.Sprint(fencingChecks))
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
	teststore.Engines(t, func(t *testing.T, open teststore.Open) {
		st := open(t)
		var examples atomic.Int64
		rapid.Check(t, func(rt *rapid.T) {
			name := fmt.Sprintf("fence-%d", examples.Add(1))
			fencingScenario(rt, st, name)
		})
	})
}

func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

const fencingTTL = 240 * time.Millisecond

// skewedClock is a holder's local clock: offset from real time, running
// at rate real seconds per second from base.
type skewedClock struct {
	base   time.Time
	offset time.Duration
	rate   float64
}

func (c skewedClock) now() time.Time {
	real := time.Now()
	return c.base.Add(c.offset + time.Duration(c.rate*float64(real.Sub(c.base))))
}

// real converts a reading of this clock to real time.
func (c skewedClock) real(local time.Time) time.Time {
	return c.base.Add(time.Duration(float64(local.Sub(c.base)-c.offset) / c.rate))
}

// span is one incarnation's hold of one fence of one lease, in real time.
type span struct {
	inc        int
	projectID  string
	fence      int64
	start, end time.Time
}

type spanKey struct {
	inc       int
	projectID string
	fence     int64
}

// recorder gathers the spans of every incarnation of a scenario.
type recorder struct {
	mu     sync.Mutex
	spans  map[spanKey]*span
	errors []string
}

// granted records a lease granted to inc by a store call that returned
// at returned.
func (r *recorder) granted(inc int, ls []store.Lease, returned time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range ls {
		k := spanKey{inc, l.ProjectID, l.Fence}
		if r.spans[k] == nil {
			r.spans[k] = &span{inc: inc, projectID: l.ProjectID, fence: l.Fence, start: returned, end: returned}
		}
	}
}

// published records a set inc published: each lease's safe time, in real
// time, extends its span.
func (r *recorder) published(inc int, s lease.Set, c skewedClock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range s {
		sp := r.spans[spanKey{inc, h.ProjectID, h.Fence}]
		if sp == nil {
			r.errors = append(r.errors, fmt.Sprintf("incarnation %d published %s fence %d, which no store call granted it", inc, h.ProjectID, h.Fence))
			continue
		}
		if end := c.real(h.SafeUntil); end.After(sp.end) {
			sp.end = end
		}
	}
}

// stopped cuts inc's spans at the instant it was stopped.
func (r *recorder) stopped(inc int, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sp := range r.spans {
		if sp.inc == inc && sp.end.After(at) {
			sp.end = at
		}
	}
}

// fencingStore is one incarnation's view of the real store: it records
// the leases granted, delays calls when told to (before the call, or
// after it with the call done but its answer lost to the timeout), and
// drops the release of a crashed process.
type fencingStore struct {
	lease.Store
	rec       *recorder
	inc       int
	delay     atomic.Int64 // nanoseconds, before and after each call
	noRelease atomic.Bool
}

func (s *fencingStore) wait(ctx context.Context) error {
	d := time.Duration(s.delay.Load())
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *fencingStore) grant(ctx context.Context, call func() ([]store.Lease, error)) ([]store.Lease, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	ls, err := call()
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx); err != nil {
		return nil, err // granted in the database, lost on the way back
	}
	s.rec.granted(s.inc, ls, time.Now())
	return ls, nil
}

func (s *fencingStore) AcquireLeases(ctx context.Context, courier, holder string, ids []string, ttl time.Duration) ([]store.Lease, error) {
	return s.grant(ctx, func() ([]store.Lease, error) { return s.Store.AcquireLeases(ctx, courier, holder, ids, ttl) })
}

func (s *fencingStore) ReclaimLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	return s.grant(ctx, func() ([]store.Lease, error) { return s.Store.ReclaimLeases(ctx, courier, holder, ttl) })
}

func (s *fencingStore) RenewLeases(ctx context.Context, courier, holder string, ttl time.Duration) ([]store.Lease, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	ls, err := s.Store.RenewLeases(ctx, courier, holder, ttl)
	if err != nil {
		return nil, err
	}
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return ls, nil
}

func (s *fencingStore) ReleaseLeases(ctx context.Context, courier, holder string, ids []string) error {
	if s.noRelease.Load() {
		return nil // the process died before releasing
	}
	return s.Store.ReleaseLeases(ctx, courier, holder, ids)
}

// incarnation is one running keeper of one holder.
type incarnation struct {
	n    int
	k    *lease.Keeper
	st   *fencingStore
	stop context.CancelFunc
	done chan struct{}
}

func fencingScenario(rt *rapid.T, st store.Store, name string) {
	ctx := context.Background()
	projects := []string{
		must(st.CreateProject(ctx, storetest.NewUUID())).ID,
		must(st.CreateProject(ctx, storetest.NewUUID())).ID,
	}
	base := time.Now()
	holders := rapid.IntRange(2, 3).Draw(rt, "holders")
	clocks := make([]skewedClock, holders)
	for i := range clocks {
		clocks[i] = skewedClock{base: base,
			offset: time.Duration(rapid.Int64Range(-int64(time.Hour), int64(time.Hour)).Draw(rt, fmt.Sprintf("offset%d", i))),
			rate:   rapid.Float64Range(0.8, 1.25).Draw(rt, fmt.Sprintf("rate%d", i))}
	}
	rec := &recorder{spans: map[spanKey]*span{}}
	running := make([]*incarnation, holders)
	crashed := make([]bool, holders)
	incs := 0
	var observers sync.WaitGroup
	start := func(i int) {
		incs++
		fs := &fencingStore{Store: st, rec: rec, inc: incs}
		k := lease.New(fs, lease.Options{Name: name, TTL: fencingTTL, ListEvery: fencingTTL / 3,
			Holder: &lease.Identity{ID: fmt.Sprintf("holder-%d", i), Reclaim: crashed[i]},
			Wanted: func(context.Context) ([]string, error) { return projects, nil },
			Now:    clocks[i].now})
		kctx, cancel := context.WithCancel(ctx)
		in := &incarnation{n: incs, k: k, st: fs, stop: cancel, done: make(chan struct{})}
		go func() { _ = k.Run(kctx); close(in.done) }()
		observers.Go(func() {
			for {
				s, changed := k.Held()
				rec.published(in.n, s, clocks[i])
				select {
				case <-changed:
				case <-in.done:
					return
				}
			}
		})
		running[i] = in
	}
	stop := func(i int, crash bool) {
		in := running[i]
		in.st.noRelease.Store(crash)
		rec.stopped(in.n, time.Now())
		in.stop()
		<-in.done
		running[i] = nil
		crashed[i] = crash
	}
	for i := range holders {
		start(i)
	}
	for step := range rapid.IntRange(4, 10).Draw(rt, "steps") {
		i := rapid.IntRange(0, holders-1).Draw(rt, fmt.Sprintf("holder@%d", step))
		switch rapid.SampledFrom([]string{"start", "stop", "crash", "want", "slow", "wait"}).Draw(rt, fmt.Sprintf("action@%d", step)) {
		case "start":
			if running[i] == nil {
				start(i)
			}
		case "stop", "crash":
			if running[i] != nil {
				stop(i, rapid.Bool().Draw(rt, fmt.Sprintf("crash@%d", step)))
			}
		case "want":
			if running[i] != nil {
				running[i].k.Want(rapid.SampledFrom(projects).Draw(rt, fmt.Sprintf("project@%d", step)), rapid.Bool().Draw(rt, fmt.Sprintf("force@%d", step)))
			}
		case "slow":
			if running[i] != nil {
				// Up to twice the call timeout (a fifth of the lease),
				// before and after each call.
				running[i].st.delay.Store(int64(rapid.IntRange(0, 4).Draw(rt, fmt.Sprintf("delay@%d", step))) * int64(fencingTTL/10))
			}
		}
		// The holders run on the database's real clock meanwhile: from
		// an eighth of the lease to a whole one.
		time.Sleep(time.Duration(rapid.IntRange(1, 8).Draw(rt, fmt.Sprintf("wait@%d", step))) * fencingTTL / 8)
	}
	for i := range running {
		if running[i] != nil {
			stop(i, false)
		}
	}
	observers.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.errors {
		rt.Error(e)
	}
	held := 0
	for _, a := range rec.spans {
		if a.end.After(a.start) {
			held++
		}
		for _, b := range rec.spans {
			if a.inc < b.inc && a.projectID == b.projectID && a.start.Before(b.end) && b.start.Before(a.end) {
				rt.Fatalf("two holders of %s with overlapping safe times: incarnation %d fence %d [%v, %v] and incarnation %d fence %d [%v, %v]",
					a.projectID, a.inc, a.fence, a.start.Sub(base), a.end.Sub(base), b.inc, b.fence, b.start.Sub(base), b.end.Sub(base))
			}
		}
	}
	rt.Logf("%d incarnations, %d safe spans", incs, held)
}
