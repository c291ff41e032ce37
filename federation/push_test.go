package federation_test

import (
	"slices"
	"testing"
	"time"

	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestPushAndResubscribe: with backfill polling once a minute, records
// reach B only by WebSub push; B asks for a 2 s lease, so the
// subscription lapses unless renewed, and records posted after several
// leases still arrive by push. It logs the A→B latency (p50, p99).
func TestPushAndResubscribe(t *testing.T) {
	slow := timing{poll: time.Minute, idlePoll: time.Minute, keys: 100 * time.Millisecond, subLease: 2 * time.Second}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", slow)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", slow)
	readA := a.project(pid)
	b.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	b.peer(pid, a, readA, "")
	// The first backfill round imports A's keys; wait for the subscription.
	eventually(t, 10*time.Second, "subscription active", func() (bool, string) {
		return subscriptionActive(t, b, pid), ""
	})
	var lat []time.Duration
	measure := func(n int) {
		for range n {
			ev, raw := sa.Event(t, storetest.Spec{})
			start := time.Now()
			a.post(appendA, raw)
			for !slices.Contains(b.eventIDs(pid), ev.ID) {
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%s not pushed to B within 10s", ev.ID)
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
	}
	measure(50)
	time.Sleep(5 * time.Second) // 2.5 leases: only renewals keep deliveries coming
	measure(20)
	slices.Sort(lat)
	t.Logf("A→B by push: p50 %v, p99 %v over %d events (includes B's store poll every 2ms)", lat[len(lat)/2], lat[len(lat)*99/100], len(lat))
}

func firstPeer(t *testing.T, r *testRelay, pid string) string {
	t.Helper()
	peers, err := r.st.Peers(ctx, pid)
	if err != nil || len(peers) == 0 {
		t.Fatalf("peers: %v %v", peers, err)
	}
	return peers[0].ID
}

func subscriptionActive(t *testing.T, r *testRelay, pid string) bool {
	t.Helper()
	st := r.fed.Status(firstPeer(t, r, pid))
	if st == nil {
		return false
	}
	return federation.StatusSubscription(st) == "active"
}
