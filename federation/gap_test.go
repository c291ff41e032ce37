package federation_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store/storetest"
)

// TestSetupWindowNeedsNoPoll: B's polls are a minute apart, so only a
// push or a backfill round started by the link itself can bring a record
// within seconds. Events are posted to A every 25 ms from before the link
// exists until well after B's subscription is active; each one reaches B
// within 2 s of its post (the bound), including those A stored
// between B's first backfill page and the moment A's hub took the
// subscription (B answers the hub's verification a second late, so that
// window is wide).
func TestSetupWindowNeedsNoPoll(t *testing.T) {
	slow := timing{poll: time.Minute, idlePoll: time.Minute, keys: time.Minute, subLease: time.Hour, verifyDelay: time.Second}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", slow)
	readA := a.project(pid)
	b.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)

	var mu sync.Mutex
	posted := map[string]time.Time{}
	arrived := map[string]time.Time{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // B's arrivals, every 10 ms
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			ids := b.eventIDs(pid)
			now := time.Now()
			mu.Lock()
			for _, id := range ids {
				if _, ok := arrived[id]; !ok {
					arrived[id] = now
				}
			}
			mu.Unlock()
		}
	})
	post := func() {
		ev, raw := sa.Event(t, storetest.Spec{})
		mu.Lock()
		posted[ev.ID] = time.Now()
		mu.Unlock()
		a.post(appendA, raw)
	}
	for range 5 {
		post()
	}
	b.peer(pid, a, readA, "")
	start := time.Now()
	active := time.Time{}
	for time.Since(start) < 15*time.Second && (active.IsZero() || time.Since(active) < time.Second) {
		post()
		if active.IsZero() && subscriptionActive(t, b, pid) {
			active = time.Now()
		}
		time.Sleep(25 * time.Millisecond)
	}
	if active.IsZero() {
		t.Fatal("B's subscription to A is not active after 15 s")
	}
	time.Sleep(2500 * time.Millisecond)
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var worst time.Duration
	for id, at := range posted {
		got, ok := arrived[id]
		if !ok {
			t.Errorf("%s (posted %v after the link) never reached B", id, at.Sub(start))
			continue
		}
		worst = max(worst, got.Sub(at))
		if got.Sub(at) > 2*time.Second && at.After(start) {
			t.Errorf("%s posted %v after the link reached B %v after its post, want ≤ 2 s", id, at.Sub(start), got.Sub(at))
		}
	}
	t.Logf("%d events; subscription active %v after the link; slowest arrival %v", len(posted), active.Sub(start), worst)
}

// TestLostPushFetchedAtOnce: with B subscribed and its polls a minute
// apart, one push to B is lost (B's callback acknowledges it and drops
// it). The next record's push does not follow what B handled, so B
// backfills at once: the lost record is on B within 2 s of that next
// post, not at the next poll.
func TestLostPushFetchedAtOnce(t *testing.T) {
	drop := &atomic.Bool{}
	slow := timing{poll: time.Minute, idlePoll: time.Minute, keys: time.Minute, subLease: time.Hour, dropPush: drop}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", slow)
	readA := a.project(pid)
	b.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	b.peer(pid, a, readA, "")
	eventually(t, 10*time.Second, "subscription active", func() (bool, string) { return subscriptionActive(t, b, pid), "" })
	has := func(id string) bool { return slices.Contains(b.eventIDs(pid), id) }
	ev, raw := sa.Event(t, storetest.Spec{})
	a.post(appendA, raw)
	eventually(t, 5*time.Second, "first push", func() (bool, string) { return has(ev.ID), "" })
	// Past the settling after the verification (its rounds every 250 ms
	// would fetch the lost record too, if the first record came by one).
	time.Sleep(5500 * time.Millisecond)

	drop.Store(true)
	lost, raw := sa.Event(t, storetest.Spec{Summary: "lost"})
	a.post(appendA, raw)
	eventually(t, 5*time.Second, "the push dropped", func() (bool, string) { return !drop.Load(), "" })
	if has(lost.ID) {
		t.Fatal("the dropped push reached B")
	}
	next, raw := sa.Event(t, storetest.Spec{Summary: "next"})
	start := time.Now()
	a.post(appendA, raw)
	eventually(t, 2*time.Second, "the lost record fetched after the next push", func() (bool, string) {
		return has(lost.ID) && has(next.ID), ""
	})
	t.Logf("lost record on B %v after the next post", time.Since(start))
}
