package federation_test

import (
	"sync"
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
