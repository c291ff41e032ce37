package storetest

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
)

func leaseOf(t *testing.T, s store.Store, courier, holder, project string, ttl time.Duration) store.Lease {
	t.Helper()
	ls, err := s.AcquireLeases(ctx, courier, holder, []string{project}, ttl)
	if err != nil || len(ls) != 1 {
		t.Fatalf("%s acquires %s of %s: %v %v, want one lease", holder, courier, project, ls, err)
	}
	return ls[0]
}

func stateOf(t *testing.T, s store.Store, courier, project, target string) store.TargetState {
	t.Helper()
	for _, ts := range must[[]store.TargetState](t, "target states")(s.TargetStates(ctx, courier, project)) {
		if ts.Target == target {
			return ts
		}
	}
	return store.TargetState{Target: target}
}

func testCourierCursors(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	other := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	ws := leaseOf(t, s, "websub", "relay-a", pid, time.Minute)
	mx := leaseOf(t, s, "matrix", "relay-a", pid, time.Minute)
	wo := leaseOf(t, s, "websub", "relay-a", other, time.Minute)
	cursor := func(courier, project, target string) int64 {
		t.Helper()
		return stateOf(t, s, courier, project, target).ReceivedSeq
	}
	advance := func(l store.Lease, target string, seq int64) {
		t.Helper()
		if err := s.AdvanceCursor(ctx, l, target, seq); err != nil {
			t.Fatalf("advance %s %s to %d: %v", l.Courier, target, seq, err)
		}
	}
	if got := must[[]store.TargetState](t, "states")(s.TargetStates(ctx, "websub", pid)); len(got) != 0 {
		t.Fatalf("states before any write: %v", got)
	}
	for _, step := range []struct{ to, want int64 }{{5, 5}, {3, 5}, {5, 5}, {9, 9}, {0, 9}, {10, 10}} {
		advance(ws, "https://a.example/cb", step.to)
		if got := cursor("websub", pid, "https://a.example/cb"); got != step.want {
			t.Fatalf("after advancing to %d: cursor %d, want %d", step.to, got, step.want)
		}
	}
	// Cursors are independent per courier, project and target.
	advance(ws, "https://b.example/cb", 2)
	advance(mx, "https://a.example/cb", 7)
	advance(wo, "https://a.example/cb", 1)
	for _, tc := range []struct {
		courier, project, target string
		want                     int64
	}{
		{"websub", pid, "https://a.example/cb", 10},
		{"websub", pid, "https://b.example/cb", 2},
		{"matrix", pid, "https://a.example/cb", 7},
		{"websub", other, "https://a.example/cb", 1},
		{"matrix", other, "https://a.example/cb", 0},
	} {
		if got := cursor(tc.courier, tc.project, tc.target); got != tc.want {
			t.Errorf("%s %s %s: cursor %d, want %d", tc.courier, tc.project, tc.target, got, tc.want)
		}
	}
	states := must[[]store.TargetState](t, "states")(s.TargetStates(ctx, "websub", pid))
	if len(states) != 2 || states[0].Target != "https://a.example/cb" || states[1].Target != "https://b.example/cb" {
		t.Fatalf("states = %+v, want a and b in target order", states)
	}
	if err := s.AdvanceCursor(ctx, ws, "https://a.example/cb", -1); err == nil {
		t.Fatal("negative cursor accepted")
	}

	// A cursor write names its lease: after the lease is taken over, the
	// old holder can no longer move it.
	if err := s.ReleaseLeases(ctx, "websub", "relay-a", []string{pid}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "advance after release", s.AdvanceCursor(ctx, ws, "https://a.example/cb", 11), store.ErrLeaseLost)
	wb := leaseOf(t, s, "websub", "relay-b", pid, time.Minute)
	wantErr(t, "advance under the old lease", s.AdvanceCursor(ctx, ws, "https://a.example/cb", 11), store.ErrLeaseLost)
	stale := wb
	stale.Fence--
	wantErr(t, "advance under an old fence", s.AdvanceCursor(ctx, stale, "https://a.example/cb", 11), store.ErrLeaseLost)
	if got := cursor("websub", pid, "https://a.example/cb"); got != 10 {
		t.Fatalf("after refused advances: cursor %d, want 10", got)
	}
	// Several targets in one write; a target listed twice takes its
	// highest seq; nothing is written under a stale lease.
	if err := s.AdvanceCursors(ctx, wb, []store.CursorAdvance{{Target: "https://a.example/cb", ReceivedSeq: 11}, {Target: "https://c.example/cb", ReceivedSeq: 4}, {Target: "https://c.example/cb", ReceivedSeq: 6}}); err != nil {
		t.Fatal(err)
	}
	if got := cursor("websub", pid, "https://c.example/cb"); got != 6 {
		t.Fatalf("batch advance: cursor c %d, want 6", got)
	}
	wantErr(t, "batch advance under the old lease", s.AdvanceCursors(ctx, ws, []store.CursorAdvance{{Target: "https://c.example/cb", ReceivedSeq: 9}}), store.ErrLeaseLost)
	if got := cursor("websub", pid, "https://c.example/cb"); got != 6 {
		t.Fatalf("after a refused batch: cursor c %d, want 6", got)
	}
	advance(wb, "https://a.example/cb", 12)
	if got := cursor("websub", pid, "https://a.example/cb"); got != 12 {
		t.Fatalf("new holder's advance: cursor %d, want 12", got)
	}
}

func testCourierBackoff(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	l := leaseOf(t, s, "websub", "relay-a", pid, time.Minute)
	const target = "sub-1"
	fail := func(retry time.Duration, msg string) store.TargetState {
		t.Helper()
		return must[store.TargetState](t, "record failure")(s.RecordFailure(ctx, l, target, retry, msg))
	}
	// A failure before any delivery creates the state at cursor 0.
	ts := fail(time.Hour, "callback answered 500")
	if ts.Target != target || ts.ReceivedSeq != 0 || ts.Failures != 1 || ts.LastError != "callback answered 500" {
		t.Fatalf("first failure: %+v", ts)
	}
	if ts.RetryIn < 59*time.Minute || ts.RetryIn > time.Hour {
		t.Fatalf("first failure: retry in %v, want about 1h", ts.RetryIn)
	}
	checkDBTime(t, "failing_since", ts.FailingSince)
	first := ts.FailingSince
	if err := s.AdvanceCursor(ctx, l, target, 4); err != nil {
		t.Fatal(err)
	}
	ts = fail(0, strings.Repeat("é", 150)) // 300 bytes: cut at 200 on a rune boundary
	if ts.Failures != 1 || ts.ReceivedSeq != 4 || ts.RetryIn != 0 {
		t.Fatalf("failure after a success: %+v", ts)
	}
	if ts.LastError != strings.Repeat("é", 100) {
		t.Fatalf("last_error kept %d bytes: %q", len(ts.LastError), ts.LastError)
	}
	if ts.FailingSince.Before(first) {
		t.Fatalf("failing_since %v went back before %v", ts.FailingSince, first)
	}
	since := ts.FailingSince
	ts = fail(30*time.Second, "timeout")
	if ts.Failures != 2 || !ts.FailingSince.Equal(since) || ts.LastError != "timeout" {
		t.Fatalf("second failure: %+v (failing since %v)", ts, since)
	}
	if got := stateOf(t, s, "websub", pid, target); got.Failures != 2 || got.RetryIn <= 25*time.Second || got.RetryIn > 30*time.Second {
		t.Fatalf("state as read: %+v", got)
	}
	// A success clears the failures.
	if err := s.AdvanceCursor(ctx, l, target, 4); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, s, "websub", pid, target); got != (store.TargetState{Target: target, ReceivedSeq: 4}) {
		t.Fatalf("after success: %+v", got)
	}
	// Failures are fenced too.
	if err := s.ReleaseLeases(ctx, "websub", "relay-a", []string{pid}); err != nil {
		t.Fatal(err)
	}
	_, err := s.RecordFailure(ctx, l, target, time.Second, "x")
	wantErr(t, "failure after release", err, store.ErrLeaseLost)
	// Forgetting a target deletes its state; forgetting it again is fine.
	for range 2 {
		if err := s.ForgetTarget(ctx, "websub", pid, target); err != nil {
			t.Fatal(err)
		}
	}
	if got := must[[]store.TargetState](t, "states")(s.TargetStates(ctx, "websub", pid)); len(got) != 0 {
		t.Fatalf("after forget: %+v", got)
	}
}

func testCourierLeases(t *testing.T, s store.Store) {
	pid := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pid2 := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	acquire := func(courier, holder string, ttl time.Duration, want bool) store.Lease {
		t.Helper()
		ls, err := s.AcquireLeases(ctx, courier, holder, []string{pid}, ttl)
		if err != nil || (len(ls) == 1) != want {
			t.Fatalf("%s acquires %s: %v %v, want held=%v", holder, courier, ls, err, want)
		}
		if want {
			if ls[0].Courier != courier || ls[0].ProjectID != pid || ls[0].Holder != holder || ls[0].Fence < 1 {
				t.Fatalf("lease %+v", ls[0])
			}
			return ls[0]
		}
		return store.Lease{}
	}
	release := func(courier, holder string) {
		t.Helper()
		if err := s.ReleaseLeases(ctx, courier, holder, []string{pid}); err != nil {
			t.Fatalf("%s releases %s: %v", holder, courier, err)
		}
	}
	a1 := acquire("websub", "relay-a", time.Minute, true)
	acquire("websub", "relay-b", time.Minute, false)
	if a2 := acquire("websub", "relay-a", time.Minute, true); a2.Fence != a1.Fence {
		t.Fatalf("a renewal changed the fence: %d → %d", a1.Fence, a2.Fence)
	}
	acquire("matrix", "relay-b", time.Minute, true) // another courier, another lease
	release("websub", "relay-b")                    // not b's: nothing happens
	acquire("websub", "relay-b", time.Minute, false)
	release("websub", "relay-a")
	b := acquire("websub", "relay-b", time.Minute, true)
	if b.Fence <= a1.Fence {
		t.Fatalf("a new holder's fence %d is not above %d", b.Fence, a1.Fence)
	}
	acquire("websub", "relay-a", time.Minute, false)

	// A lease is taken over once expired by the database clock, not before.
	acquire("federation", "relay-a", 150*time.Millisecond, true)
	acquire("federation", "relay-b", time.Minute, false)
	time.Sleep(300 * time.Millisecond)
	acquire("federation", "relay-b", time.Minute, true)
	acquire("federation", "relay-a", time.Minute, false)
	// A lapsed lease taken again by its own holder gets a new fence.
	x1 := acquire("atom", "relay-a", 150*time.Millisecond, true)
	time.Sleep(300 * time.Millisecond)
	if x2 := acquire("atom", "relay-a", time.Minute, true); x2.Fence <= x1.Fence {
		t.Fatalf("a lapsed lease taken again kept fence %d (was %d)", x2.Fence, x1.Fence)
	}

	// RenewLeases extends every live lease of the holder in one call and
	// returns them sorted; a lapsed one is not renewed.
	acquireAll := func(holder string, ids []string, ttl time.Duration) []store.Lease {
		t.Helper()
		return must[[]store.Lease](t, "acquire")(s.AcquireLeases(ctx, "renew", holder, ids, ttl))
	}
	unknown := NewUUID()
	if got := acquireAll("relay-a", []string{pid2, unknown, pid, pid2}, 200*time.Millisecond); len(got) != 2 ||
		got[0].ProjectID != pid2 || got[1].ProjectID != pid {
		t.Fatalf("batch acquire (unknown project skipped, repeat listed once): %+v", got)
	}
	renewed := must[[]store.Lease](t, "renew")(s.RenewLeases(ctx, "renew", "relay-a", time.Minute))
	if len(renewed) != 2 || renewed[0].ProjectID > renewed[1].ProjectID {
		t.Fatalf("renewed %+v, want both, sorted", renewed)
	}
	time.Sleep(300 * time.Millisecond) // past the first ttl: only a renewal keeps them
	if got := acquireAll("relay-b", []string{pid, pid2}, time.Minute); len(got) != 0 {
		t.Fatalf("relay-b took renewed leases: %+v", got)
	}
	if got := must[[]store.Lease](t, "renew")(s.RenewLeases(ctx, "renew", "relay-b", time.Minute)); len(got) != 0 {
		t.Fatalf("relay-b renewed leases it does not hold: %+v", got)
	}
	short := acquireAll("relay-c", []string{pid}, time.Minute)
	if len(short) != 0 {
		t.Fatalf("relay-c took a live lease: %+v", short)
	}
	if _, err := s.AcquireLeases(ctx, "websub", "relay-a", []string{pid}, 0); err == nil {
		t.Fatal("zero ttl accepted")
	}
	if _, err := s.RenewLeases(ctx, "websub", "relay-a", 0); err == nil {
		t.Fatal("zero ttl renewal accepted")
	}

	// Eight processes race for one free lease: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			ls, err := s.AcquireLeases(ctx, "race", string(rune('a'+i)), []string{pid}, time.Minute)
			if err != nil {
				errs <- err
			}
			if len(ls) == 1 {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d holders won one lease", n)
	}
}

// testFeed covers what couriers read: project ids in pages and each
// project's records across repositories in receipt order.
func testFeed(t *testing.T, s store.Store) {
	var pids []string
	for range 3 {
		pids = append(pids, must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID)
	}
	var all []string
	after := ""
	for {
		page := must[[]string](t, "project ids")(s.ProjectIDs(ctx, after, 2))
		all = append(all, page...)
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1]
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] >= all[i] {
			t.Fatalf("project ids not ascending: %v", all)
		}
	}
	for _, p := range pids {
		if !strings.Contains(strings.Join(all, " "), p) {
			t.Fatalf("project %s not listed in %v", p, all)
		}
	}

	sg := NewSigner(t, pids[0]).Register(t, s)
	other := NewSigner(t, pids[1]).Register(t, s)
	var want []string
	for i := range 5 {
		ev, c := sg.Event(t, Spec{RepositoryID: []string{"repo-a", "repo-b"}[i%2]})
		res := must[store.AppendResult](t, "append")(s.Append(ctx, ev, c))
		want = append(want, ev.ID)
		if res.Record.ReceivedSeq != int64(i+1) {
			t.Fatalf("seq %d", res.Record.ReceivedSeq)
		}
		ev, c = other.Event(t, Spec{})
		must[store.AppendResult](t, "append")(s.Append(ctx, ev, c))
	}
	recs := must[[]store.Record](t, "records after")(s.RecordsAfter(ctx, pids[0], 1, 3))
	if len(recs) != 3 {
		t.Fatalf("records after 1, limit 3: %d", len(recs))
	}
	for i, rec := range recs {
		if rec.EventID != want[i+1] || rec.ReceivedSeq != int64(i+2) || rec.ProjectID != pids[0] || len(rec.Event) == 0 {
			t.Fatalf("record %d: %+v", i, rec)
		}
		if rec.RepositoryID != []string{"repo-b", "repo-a"}[i%2] {
			t.Fatalf("record %d repository %s", i, rec.RepositoryID)
		}
		checkDBTime(t, "received_at", rec.ReceivedAt)
	}
	if got := must[[]store.Record](t, "records after")(s.RecordsAfter(ctx, pids[0], 5, 10)); len(got) != 0 {
		t.Fatalf("records after the head: %d", len(got))
	}
	if got := must[[]store.Record](t, "records after")(s.RecordsAfter(ctx, pids[2], 0, 10)); len(got) != 0 {
		t.Fatalf("records of an empty project: %d", len(got))
	}
}

// testAdvances: a subscription hears every creating append of this store
// handle, coalesced per project to its highest received_seq; exact retries
// and refused appends publish nothing; a closed subscription hears nothing
// more.
func testAdvances(t *testing.T, s store.Store) {
	p1 := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	p2 := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	a, b := NewSigner(t, p1).Register(t, s), NewSigner(t, p2).Register(t, s)
	sub := s.SubscribeAdvances()
	late := s.SubscribeAdvances()
	late.Close()
	late.Close() // twice is fine
	if _, open := <-late.Ready(); open {
		t.Fatal("a closed subscription's Ready is not closed")
	}
	heads := map[string]int64{}
	for i := range 6 {
		sg := []*Signer{a, b}[i%2]
		ev, c := sg.Event(t, Spec{})
		res := must[store.AppendResult](t, "append")(s.Append(ctx, ev, c))
		heads[sg.ProjectID] = res.Record.ReceivedSeq
		if again := must[store.AppendResult](t, "retry")(s.Append(ctx, ev, c)); again.Created {
			t.Fatal("retry created")
		}
	}
	got := map[string]int64{}
	deadline := time.After(10 * time.Second)
	for got[p1] != heads[p1] || got[p2] != heads[p2] {
		select {
		case <-sub.Ready():
			for _, adv := range sub.Take() {
				if adv.ReceivedSeq > heads[adv.ProjectID] {
					t.Fatalf("heard %+v beyond the head %d", adv, heads[adv.ProjectID])
				}
				got[adv.ProjectID] = max(got[adv.ProjectID], adv.ReceivedSeq)
			}
		case <-deadline:
			t.Fatalf("heard %v, want %v", got, heads)
		}
	}
	sub.Close()
	ev, c := a.Event(t, Spec{})
	must[store.AppendResult](t, "append")(s.Append(ctx, ev, c))
	if adv := sub.Take(); len(adv) != 0 {
		t.Fatalf("a closed subscription heard %v", adv)
	}
}

// testPeerWakes: a wake sent through this store handle reaches its open
// subscriptions exactly as sent, coalesced (on PostgreSQL through
// LISTEN/NOTIFY, whose connection the first subscription opens, so the
// wake is sent until heard); a closed subscription's Ready is closed and
// it hears nothing more.
func testPeerWakes(t *testing.T, s store.Store) {
	sub := s.SubscribePeerWakes()
	want := store.PeerWake{ProjectID: NewUUID(), PeerID: "peer-" + NewUUID()}
	deadline := time.After(10 * time.Second)
	var got []store.PeerWake
	for len(got) == 0 {
		if err := s.WakePeer(ctx, want.ProjectID, want.PeerID); err != nil {
			t.Fatal(err)
		}
		if err := s.WakePeer(ctx, want.ProjectID, want.PeerID); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.Ready():
			time.Sleep(50 * time.Millisecond) // both sent wakes heard
			got = sub.Take()
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("no wake heard within 10 s")
		}
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("heard %+v, want [%+v] (two sends coalesced)", got, want)
	}
	sub.Close()
	sub.Close()
	// Ready may still hold a signal of a wake heard after the Take.
	for i := 0; ; i++ {
		select {
		case _, open := <-sub.Ready():
			if open && i == 0 {
				continue
			}
			if open {
				t.Fatal("a closed subscription's Ready is not closed")
			}
		case <-time.After(time.Second):
			t.Fatal("a closed subscription's Ready is not closed")
		}
		break
	}
	if err := s.WakePeer(ctx, want.ProjectID, want.PeerID); err != nil {
		t.Fatal(err)
	}
	if w := sub.Take(); len(w) != 0 {
		t.Fatalf("a closed subscription heard %+v", w)
	}
}

// testCourierLeaseRead: LeaseStates reads who holds each lease and for
// how long, writing nothing; AcquireLeases takes only what the read shows
// free or expired, and a lease live elsewhere is neither taken nor
// touched (its expiry and fence stay as they were).
func testCourierLeaseRead(t *testing.T, s store.Store) {
	pa := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pb := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pc := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	ids := []string{pa, pb, pc}
	if got := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "read", ids)); len(got) != 0 {
		t.Fatalf("lease states before any lease: %+v", got)
	}
	a := leaseOf(t, s, "read", "relay-a", pa, time.Minute)
	leaseOf(t, s, "read", "relay-a", pb, 100*time.Millisecond)
	time.Sleep(250 * time.Millisecond) // pb's lease lapses by the database clock
	states := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "read", ids))
	byID := map[string]store.LeaseState{}
	for _, ls := range states {
		byID[ls.ProjectID] = ls
	}
	if len(states) != 2 || states[0].ProjectID > states[1].ProjectID {
		t.Fatalf("lease states %+v: want pa's and pb's, sorted", states)
	}
	if got := byID[pa]; got.Holder != "relay-a" || got.Fence != a.Fence || got.ExpiresIn <= 50*time.Second || got.ExpiresIn > time.Minute {
		t.Fatalf("live lease read as %+v, want relay-a, fence %d, expiring in (50s, 60s]", got, a.Fence)
	}
	if got := byID[pb]; got.Holder != "relay-a" || got.ExpiresIn != 0 {
		t.Fatalf("lapsed lease read as %+v, want relay-a expiring in 0", got)
	}
	if _, ok := byID[pc]; ok {
		t.Fatal("a project without a lease row has a state")
	}
	// Another holder asks for all three: it takes the lapsed and the free
	// one, and leaves the live one exactly as it was.
	got := must[[]store.Lease](t, "acquire")(s.AcquireLeases(ctx, "read", "relay-b", ids, time.Minute))
	if len(got) != 2 || got[0].ProjectID != pb || got[1].ProjectID != pc {
		t.Fatalf("relay-b took %+v, want pb and pc", got)
	}
	after := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "read", []string{pa}))
	if len(after) != 1 || after[0].Holder != "relay-a" || after[0].Fence != a.Fence || after[0].ExpiresIn > byID[pa].ExpiresIn {
		t.Fatalf("the live lease after another holder's acquire: %+v (was %+v)", after, byID[pa])
	}
	// The reading holder's own live lease is still renewed by acquire.
	if own := must[[]store.Lease](t, "acquire")(s.AcquireLeases(ctx, "read", "relay-a", []string{pa}, time.Minute)); len(own) != 1 || own[0].Fence != a.Fence {
		t.Fatalf("own lease re-acquired as %+v, want fence %d", own, a.Fence)
	}
	if got := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "read", nil)); len(got) != 0 {
		t.Fatalf("lease states of no projects: %+v", got)
	}
}

// testCourierLeaseReclaim: a restarted process with its predecessor's
// holder identity takes that holder's live leases at once, under a new
// fence, so the predecessor's writes still in flight are refused; a
// lapsed lease, another holder's or another courier's is not reclaimed.
func testCourierLeaseReclaim(t *testing.T, s store.Store) {
	pa := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pb := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	pc := must[store.Project](t, "project")(s.CreateProject(ctx, NewUUID())).ID
	old := leaseOf(t, s, "reclaim", "relay-a", pa, time.Minute)
	oldB := leaseOf(t, s, "reclaim", "relay-a", pb, 100*time.Millisecond)
	leaseOf(t, s, "reclaim", "relay-b", pc, time.Minute)
	leaseOf(t, s, "other", "relay-a", pc, time.Minute)
	time.Sleep(250 * time.Millisecond) // pb's lease lapses
	if err := s.AdvanceCursor(ctx, old, "t", 1); err != nil {
		t.Fatalf("the predecessor's write before the restart: %v", err)
	}
	got := must[[]store.Lease](t, "reclaim")(s.ReclaimLeases(ctx, "reclaim", "relay-a", time.Minute))
	if len(got) != 1 || got[0].ProjectID != pa || got[0].Holder != "relay-a" || got[0].Courier != "reclaim" || got[0].Fence != old.Fence+1 {
		t.Fatalf("reclaimed %+v, want pa under fence %d", got, old.Fence+1)
	}
	wantErr(t, "the predecessor's write after the reclaim", s.AdvanceCursor(ctx, old, "t", 5), store.ErrLeaseLost)
	if err := s.AdvanceCursor(ctx, got[0], "t", 3); err != nil {
		t.Fatalf("the reclaimed lease's write: %v", err)
	}
	if c := stateOf(t, s, "reclaim", pa, "t").ReceivedSeq; c != 3 {
		t.Fatalf("cursor %d, want 3", c)
	}
	// The lapsed lease is taken as any free one, under a new fence too.
	if b := leaseOf(t, s, "reclaim", "relay-a", pb, time.Minute); b.Fence <= oldB.Fence {
		t.Fatalf("lapsed lease retaken under fence %d, was %d", b.Fence, oldB.Fence)
	}
	if got := must[[]store.Lease](t, "reclaim")(s.ReclaimLeases(ctx, "reclaim", "relay-c", time.Minute)); len(got) != 0 {
		t.Fatalf("a holder without leases reclaimed %+v", got)
	}
	if _, err := s.ReclaimLeases(ctx, "reclaim", "relay-a", 0); err == nil {
		t.Fatal("zero ttl reclaim accepted")
	}
	states := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "other", []string{pc}))
	if len(states) != 1 || states[0].Holder != "relay-a" || states[0].Fence != 1 {
		t.Fatalf("another courier's lease after a reclaim: %+v, want untouched at fence 1", states)
	}
}

// testRelayLease: the project id "" names a relay-wide lease (one holder
// for the whole relay): it is read, taken, renewed, reclaimed and
// released as a project's, with no project behind it.
func testRelayLease(t *testing.T, s store.Store) {
	a := leaseOf(t, s, "matrix-sync", "relay-a", "", time.Minute)
	if a.ProjectID != "" || a.Fence < 1 {
		t.Fatalf("relay-wide lease %+v", a)
	}
	if got := must[[]store.Lease](t, "acquire")(s.AcquireLeases(ctx, "matrix-sync", "relay-b", []string{""}, time.Minute)); len(got) != 0 {
		t.Fatalf("relay-b took a live relay-wide lease: %+v", got)
	}
	states := must[[]store.LeaseState](t, "lease states")(s.LeaseStates(ctx, "matrix-sync", []string{""}))
	if len(states) != 1 || states[0].Holder != "relay-a" || states[0].ExpiresIn <= 0 {
		t.Fatalf("relay-wide lease state %+v", states)
	}
	if got := must[[]store.Lease](t, "reclaim")(s.ReclaimLeases(ctx, "matrix-sync", "relay-a", time.Minute)); len(got) != 1 || got[0].Fence != a.Fence+1 {
		t.Fatalf("reclaimed %+v, want fence %d", got, a.Fence+1)
	}
	if err := s.ReleaseLeases(ctx, "matrix-sync", "relay-a", []string{""}); err != nil {
		t.Fatal(err)
	}
	if b := leaseOf(t, s, "matrix-sync", "relay-b", "", time.Minute); b.Fence <= a.Fence+1 {
		t.Fatalf("the next holder's fence %d is not above %d", b.Fence, a.Fence+1)
	}
}
