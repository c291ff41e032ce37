package federation_test

import (
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/store/storetest"
)

// partition is B's outbound transport: while cut, every request of B's
// link to A (backfill, registry, subscribe) fails as an unreachable host
// would. A can still reach B's callback.
type partition struct{ cut atomic.Bool }

var errPartition = errors.New("partitioned: the remote is unreachable")

func (p *partition) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.cut.Load() {
		return nil, errPartition
	}
	return http.DefaultTransport.RoundTrip(r)
}

func linkStatus(t *testing.T, r *testRelay, pid string) *federation.LinkStatus {
	t.Helper()
	st, _ := r.fed.Status(firstPeer(t, r, pid)).(*federation.LinkStatus)
	if st == nil {
		return &federation.LinkStatus{}
	}
	return st
}

// TestLapsedSubscriptionReestablished: B's subscription to A's hub has a
// 2 s lease; B cannot reach A for longer than that, so no renewal is
// verified and A's hub lets the subscription end. Records posted to A
// meanwhile are not pushed (the lease is over) and cannot be polled. B's
// link shows the subscription "expired" and polls every PollInterval;
// once A is reachable the poll catches up on every record, B subscribes
// again, and pushes resume: a record arrives well within the poll
// interval (with IdlePollInterval a minute, only a push can bring it).
func TestLapsedSubscriptionReestablished(t *testing.T) {
	cut := &partition{}
	tm := timing{poll: 2 * time.Second, idlePoll: time.Minute, keys: time.Minute, subLease: 2 * time.Second, transport: cut}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	b := startRelay(t, "B", openStore(t, pgOr(), ""), "127.0.0.1:0", tm)
	readA := a.project(pid)
	b.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)
	b.peer(pid, a, readA, "")
	eventually(t, 10*time.Second, "subscription active", func() (bool, string) {
		return subscriptionActive(t, b, pid), linkStatus(t, b, pid).Subscription
	})
	has := func(id string) bool { return slices.Contains(b.eventIDs(pid), id) }
	// A push while subscribed (the baseline).
	ev, raw := sa.Event(t, storetest.Spec{})
	a.post(appendA, raw)
	eventually(t, 5*time.Second, "first push", func() (bool, string) { return has(ev.ID), "" })

	// Partition longer than the lease.
	cut.cut.Store(true)
	eventually(t, 10*time.Second, "subscription expired", func() (bool, string) {
		s := linkStatus(t, b, pid).Subscription
		return s == federation.SubscriptionExpired, s
	})
	var during []string
	for range 5 {
		ev, raw := sa.Event(t, storetest.Spec{})
		a.post(appendA, raw)
		during = append(during, ev.ID)
	}
	time.Sleep(tm.poll + 500*time.Millisecond) // a push (none) or a poll (cut) would have had its chance
	for _, id := range during {
		if has(id) {
			t.Fatalf("%s reached B during the partition: A's hub delivered after the lease ended", id)
		}
	}
	if st := linkStatus(t, b, pid); st.LastError == "" {
		t.Errorf("the link shows no error while A is unreachable: %+v", st)
	}

	// Heal: the poll catches up, the subscription is verified again.
	cut.cut.Store(false)
	eventually(t, 3*tm.poll+5*time.Second, "catch-up", func() (bool, string) {
		n := 0
		for _, id := range during {
			if has(id) {
				n++
			}
		}
		return n == len(during), ""
	})
	eventually(t, 3*tm.poll+5*time.Second, "re-subscribed", func() (bool, string) {
		return subscriptionActive(t, b, pid), linkStatus(t, b, pid).Subscription
	})
	// Let any backfill wait computed before the re-subscription end: from
	// here on backfill sleeps IdlePollInterval (a minute).
	time.Sleep(tm.poll + 200*time.Millisecond)
	for i := range 5 {
		ev, raw := sa.Event(t, storetest.Spec{})
		start := time.Now()
		a.post(appendA, raw)
		for !has(ev.ID) {
			if time.Since(start) > tm.poll {
				t.Fatalf("record %d after re-subscription not on B within the poll interval %s: pushes did not resume (%+v)", i, tm.poll, linkStatus(t, b, pid))
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Logf("after re-subscription: pushed in %v", time.Since(start))
	}
	converged(t, pid, 1+len(during)+5, 5*time.Second, a, b)
}
