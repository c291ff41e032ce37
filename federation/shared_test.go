package federation_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/federation"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// callbackCounts counts the answers a relay gave on a peer link's
// callback, by "METHOD status".
type callbackCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callbackCounts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

// TestCallbackOnAnyProcess: relay B is two processes on one store (a
// SQLite file, and PostgreSQL when configured) behind a load balancer
// whose callback path reaches process 2 only. Process 1 runs the peer
// link to A (it alone runs federation; process 2 holds no lease). A's
// hub's verification of intent is answered by process 2 from the stored
// subscriber state, process 1's link learns of it from the store, and
// A's pushes, HMAC-signed with the secret process 1 chose, are verified
// and stored by process 2: with backfill polling once a minute, the
// records reach B only that way.
func TestCallbackOnAnyProcess(t *testing.T) {
	for _, kind := range engines() {
		t.Run(kind, func(t *testing.T) { testCallbackOnAnyProcess(t, kind) })
	}
}

func testCallbackOnAnyProcess(t *testing.T, kind string) {
	slow := timing{poll: time.Minute, idlePoll: time.Minute, keys: time.Minute, subLease: time.Hour}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", slow)
	readA := a.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)

	path := ""
	if kind == "postgres" {
		path = pgtest.FreshDatabase(t)
	} else {
		path = tempDB(t, "b")
	}
	st1, st2 := openStore(t, kind, path), openStore(t, kind, path)
	t.Cleanup(func() { _ = st1.Close(); _ = st2.Close() })

	// The load balancer: callbacks to process 2, everything else to 1.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lbURL := "http://" + ln.Addr().String()
	var b1, b2 *testRelay
	counts := map[string]*callbackCounts{"1": {n: map[string]int{}}, "2": {n: map[string]int{}}}
	proxy := func(name string, r *testRelay) http.Handler {
		u, _ := url.Parse(r.public)
		rp := httputil.NewSingleHostReverseProxy(u)
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			rp.ServeHTTP(rec, req)
			if strings.HasPrefix(req.URL.Path, relay.CallbackPath) {
				c := counts[name]
				c.mu.Lock()
				c.n[req.Method+" "+http.StatusText(rec.status)]++
				c.mu.Unlock()
			}
		})
	}
	lb := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, relay.CallbackPath) {
			proxy("2", b2).ServeHTTP(w, r)
			return
		}
		proxy("1", b1).ServeHTTP(w, r)
	}))
	lb.Listener.Close()
	lb.Listener = ln
	lb.Start()
	t.Cleanup(lb.Close)

	b1tm, b2tm := slow, slow
	b1tm.publicURL, b2tm.publicURL, b2tm.noLinks = lbURL, lbURL, true
	b1 = startRelay(t, "B1", st1, "127.0.0.1:0", b1tm)
	b2 = startRelay(t, "B2", st2, "127.0.0.1:0", b2tm)
	b1.project(pid)
	peerID := b1.peer(pid, a, readA, "")

	eventually(t, 15*time.Second, "subscription active on process 1", func() (bool, string) {
		return subscriptionActive(t, b1, pid), ""
	})
	if n := counts["2"].get("GET OK"); n < 1 {
		t.Fatalf("verifications answered 200 by process 2: %d, want ≥ 1 (%v)", n, counts["2"].n)
	}
	sub, err := st2.PeerSubscription(ctx, pid, peerID)
	if err != nil {
		t.Fatal(err)
	}
	wantTopic := hub.Topic{ProjectID: pid, Format: hub.FormatJSON}.URL(a.public)
	if sub.Topic != wantTopic || sub.Mode != "subscribe" || sub.State != "active" || !sub.Verified || sub.Failed ||
		sub.Lease != time.Hour || len(sub.Secret) != 43 || sub.VerifiedAt.Before(sub.RequestedAt.Add(-time.Millisecond)) {
		t.Fatalf("stored subscription = topic %q mode %q state %q verified %v failed %v lease %v secret %d bytes; want %q subscribe active true false 1h0m0s 43",
			sub.Topic, sub.Mode, sub.State, sub.Verified, sub.Failed, sub.Lease, len(sub.Secret), wantTopic)
	}

	// Process 1's link settles with backfill rounds for 5 s after the
	// verification (its first push would end that, but pushes go to
	// process 2); after that only pushes bring records within a minute.
	time.Sleep(5500 * time.Millisecond)
	var ids []string
	for range 3 {
		ev, raw := sa.Event(t, storetest.Spec{})
		a.post(appendA, raw)
		ids = append(ids, ev.ID)
	}
	eventually(t, 10*time.Second, "records pushed to process 2 stored", func() (bool, string) {
		got := b1.eventIDs(pid)
		for _, id := range ids {
			if !slices.Contains(got, id) {
				return false, strings.Join(got, ",")
			}
		}
		return true, ""
	})
	if n := counts["2"].get("POST No Content"); n < 1 {
		t.Fatalf("deliveries answered 204 by process 2: %d, want ≥ 1 (%v)", n, counts["2"].n)
	}
	if len(counts["1"].n) != 0 {
		t.Fatalf("process 1 answered callbacks: %v, want none", counts["1"].n)
	}
	st := b1.fed.Status(peerID).(*federation.LinkStatus)
	if st.Stored != 0 {
		t.Fatalf("process 1's link stored %d records, want 0 (process 2 stored the pushes)", st.Stored)
	}
	if got := b2.fed.Status(peerID); got != nil {
		t.Fatalf("process 2 runs the link: %+v", got)
	}

	// A record A never stored, delivered straight to the callback: with
	// a signature by another secret it is acknowledged and dropped; signed
	// with the stored secret, process 2 stores it.
	ev, raw := sa.Event(t, storetest.Spec{})
	body := `{"events":[{"event":` + string(raw) + `,"receipt":{"received_seq":"1000","received_at":"` +
		time.Now().UTC().Format("2006-01-02T15:04:05.000Z") + `"},"missing_parents":[],"lineage_status":"complete"}]}`
	deliver := func(secret []byte) {
		t.Helper()
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(body))
		req, _ := http.NewRequest("POST", lbURL+relay.CallbackPath+peerID, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Link", "<"+wantTopic+`>; rel="self"`)
		req.Header.Set("X-Hub-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delivery: %d, want 204", resp.StatusCode)
		}
	}
	deliver([]byte("not the secret"))
	if slices.Contains(b1.eventIDs(pid), ev.ID) {
		t.Fatalf("a delivery with a bad signature was stored")
	}
	deliver(sub.Secret)
	if !slices.Contains(b1.eventIDs(pid), ev.ID) {
		t.Fatalf("a delivery signed with the stored secret was not stored")
	}
	if st := b1.fed.Status(peerID).(*federation.LinkStatus); st.Stored != 0 {
		t.Fatalf("process 1's link stored %d records, want 0", st.Stored)
	}
}

// TestCallbackGapWakesLinkProcess: as in TestCallbackOnAnyProcess, relay
// B is two processes on one store and A's pushes reach process 2 only,
// while process 1 runs the link with backfill polls a minute apart. One
// push is lost (process 2 acknowledges and drops it); the next one shows
// process 2 a gap, and process 2 wakes process 1 (store.PeerWakes), whose
// backfill fetches the lost record within 2 s of that next post, not at
// its next poll. On SQLite the two processes share one store handle (a
// wake stays in process there); on PostgreSQL each has its own and the
// wake is a NOTIFY.
func TestCallbackGapWakesLinkProcess(t *testing.T) {
	for _, kind := range engines() {
		t.Run(kind, func(t *testing.T) { testCallbackGapWakesLinkProcess(t, kind) })
	}
}

func testCallbackGapWakesLinkProcess(t *testing.T, kind string) {
	slow := timing{poll: time.Minute, idlePoll: time.Minute, keys: time.Minute, subLease: time.Hour}
	pid := storetest.NewUUID()
	a := startRelay(t, "A", openStore(t, "sqlite", tempDB(t, "a")), "127.0.0.1:0", fast)
	readA := a.project(pid)
	appendA := a.appendToken(pid)
	sa := storetest.NewSigner(t, pid).Register(t, a.st)

	var st1, st2 store.Store
	if kind == "postgres" {
		path := pgtest.FreshDatabase(t)
		st1, st2 = openStore(t, kind, path), openStore(t, kind, path)
		t.Cleanup(func() { _ = st2.Close() })
	} else {
		st1 = openStore(t, kind, tempDB(t, "b"))
		st2 = st1
	}
	t.Cleanup(func() { _ = st1.Close() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lbURL := "http://" + ln.Addr().String()
	var b1, b2 *testRelay
	lb := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := b1
		if strings.HasPrefix(r.URL.Path, relay.CallbackPath) {
			target = b2
		}
		u, _ := url.Parse(target.public)
		httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
	}))
	lb.Listener.Close()
	lb.Listener = ln
	lb.Start()
	t.Cleanup(lb.Close)

	drop := &atomic.Bool{}
	b1tm, b2tm := slow, slow
	b1tm.publicURL, b2tm.publicURL, b2tm.noLinks, b2tm.dropPush = lbURL, lbURL, true, drop
	b1 = startRelay(t, "B1", st1, "127.0.0.1:0", b1tm)
	b2 = startRelay(t, "B2", st2, "127.0.0.1:0", b2tm)
	b1.project(pid)
	b1.peer(pid, a, readA, "")
	eventually(t, 15*time.Second, "subscription active on process 1", func() (bool, string) {
		return subscriptionActive(t, b1, pid), ""
	})
	has := func(id string) bool { return slices.Contains(b1.eventIDs(pid), id) }
	first, raw := sa.Event(t, storetest.Spec{})
	a.post(appendA, raw)
	eventually(t, 5*time.Second, "the first push", func() (bool, string) { return has(first.ID), "" })
	// Past process 1's settling rounds after the verification (they would
	// fetch the lost record too).
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
	eventually(t, 2*time.Second, "the lost record fetched by process 1 after the next push reached process 2", func() (bool, string) {
		return has(lost.ID) && has(next.ID), ""
	})
	t.Logf("lost record on B %v after the next post", time.Since(start))
}
