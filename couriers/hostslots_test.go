package couriers_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/store"
)

// TestHangingTargetsGetASmallerShare: four targets of one host that hang
// until their delivery times out, four healthy ones beside them, four
// slots. Once each hanging target has timed out, the hanging ones hold at
// most one slot (4/4) at a time and every record reaches the healthy
// targets; before the change they retried into all four slots again and
// again (issue 27: healthy subscriptions waited up to 20 s).
func TestHangingTargetsGetASmallerShare(t *testing.T) {
	engines(t, func(t *testing.T, open func(*testing.T) store.Store) { testHangingShare(t, open(t)) })
}

func testHangingShare(t *testing.T, st store.Store) {
	p := newProject(t, st)
	rec := newRecorder(st, "ok1", "ok2", "ok3", "ok4", "hang1", "hang2", "hang3", "hang4")
	for i := range rec.targets {
		rec.targets[i].Host = "one.example"
	}
	var hanging, peak atomic.Int64
	var warm atomic.Bool // every hanging target has timed out once
	rec.hook = func(ctx context.Context, _ string, tg couriers.Target) error {
		if !strings.HasPrefix(tg.ID, "hang") {
			return nil
		}
		n := hanging.Add(1)
		defer hanging.Add(-1)
		if warm.Load() {
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
		}
		<-ctx.Done() // never answers: the delivery times out
		return ctx.Err()
	}
	r := couriers.NewRunner(st, rec, couriers.Options{Holder: "h", LeaseTTL: 3 * time.Second, Backoff: fast,
		HostLimit: func(string) int { return 4 }, DeliveryTimeout: 150 * time.Millisecond, SlowDelivery: 100 * time.Millisecond})
	start(t, r)
	appendN(t, st, p, 1)
	waitFor(t, "each hanging target timed out once", func() bool {
		for i := 1; i <= 4; i++ {
			if rec.attemptsOf(fmt.Sprintf("hang%d", i)) < 2 {
				return false
			}
		}
		return true
	})
	warm.Store(true)
	hangAttempts := func() (n int) {
		for i := 1; i <= 4; i++ {
			n += rec.attemptsOf(fmt.Sprintf("hang%d", i))
		}
		return n
	}
	retried := hangAttempts() + 8
	for round := 2; round <= 6; round++ {
		appendN(t, st, p, 3)
		waitFor(t, fmt.Sprintf("round %d to the healthy targets", round), func() bool { return rec.count("ok") == 4*(1+3*(round-1)) })
	}
	waitFor(t, "the hanging targets retried twice more", func() bool { return hangAttempts() >= retried })
	if got := peak.Load(); got > 1 {
		t.Fatalf("%d hanging deliveries in flight at once after each timed out, want at most 1 (a quarter of 4 slots)", got)
	}
	if peak.Load() == 0 {
		t.Fatal("no hanging delivery was retried after the warm-up: the test measured nothing")
	}
}
