package websub_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/couriers/websub"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestFloodOfLargeEventsStaysWithinTheCacheBudget: 480 events of about
// 64 KiB (31 MiB) are appended over HTTP by 4 posters with an append
// token while 12
// subscriptions (Atom and JSON) lag behind at different cursors: their
// callbacks take 0 to 11 ms per delivery and a quarter of them refuse
// every other one. The live Go heap, sampled after a collection every
// 50 ms, grows by at most
//
//	budget (4 MiB)
//	+ Concurrency × Batch × 512 KiB (2 × 10: the deliveries in flight,
//	  each record 8 times over: as read, as ImmutableJSON, in the rendered
//	  body and in the transport's and callback's buffers; 10 MiB)
//	+ 16 MiB (the relay's, hub's and callbacks' HTTP buffers, the store's
//	  connections and this test's state)
//
// = 30 MiB. The count-capped caches this replaces held the last 64
// batches (40 MiB here) and 64 rendered bodies whatever their size.
//
// It takes about a minute under -race; -short skips it.
func TestFloodOfLargeEventsStaysWithinTheCacheBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the flood of 31 MiB takes about a minute under -race")
	}
	const budget, concurrency, batch, events, posters, subs = 4 << 20, 2, 10, 480, 4, 12
	cache := couriers.NewCache(budget)
	quiet := slog.New(slog.DiscardHandler)
	w := newWorldWith(t, teststore.SQLite, func(o *couriers.Options, c *websub.Courier) {
		o.Cache, o.Concurrency, o.Batch, o.Logger = cache, concurrency, batch, quiet
		c.Cache, c.Logger = cache, quiet
	})
	var posts atomic.Int64
	for i := range subs {
		delay := time.Duration(i) * time.Millisecond
		var n atomic.Int64
		refuse := i%4 == 3
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				_, _ = io.WriteString(rw, r.URL.Query().Get("hub.challenge"))
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			posts.Add(1)
			time.Sleep(delay)
			if refuse && n.Add(1)%2 == 1 {
				rw.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			rw.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		format := hub.FormatAtom
		if i%2 == 1 {
			format = hub.FormatJSON
		}
		w.subscribe(&callback{srv: srv}, w.topic("repo-a", format), "s")
	}
	waitFor(t, "every subscription's target", func() bool { return w.runner.Status().Targets == subs })

	before := liveHeap()
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if g := liveHeap() - before; g > peak.Load() {
				peak.Store(g)
			}
		}
	})
	var paths []string
	for i := range 64 {
		paths = append(paths, fmt.Sprintf("p%02d/%s", i, strings.Repeat("𝔸", 230)))
	}
	var stored atomic.Int64
	var flood sync.WaitGroup
	var signing sync.Mutex // the signer numbers the session's events
	for range posters {
		flood.Go(func() {
			for range events / posters {
				signing.Lock()
				_, raw := w.signer.Event(t, storetest.Spec{RepositoryID: "repo-a", Paths: paths, Summary: strings.Repeat("𝔸", 1000)})
				signing.Unlock()
				stored.Add(int64(len(raw)))
				req, _ := http.NewRequest("POST", w.public+"/v1/correspondence/events", bytes.NewReader(raw))
				req.Header.Set("Authorization", "Bearer "+w.token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("POST: %d", resp.StatusCode)
					return
				}
			}
		})
	}
	flood.Wait()
	if t.Failed() {
		t.FailNow()
	}
	deadline := time.Now().Add(5 * time.Minute)
	for s := w.runner.Status(); s.Behind > 0; s = w.runner.Status() {
		if time.Now().After(deadline) {
			t.Fatalf("subscriptions still %d records behind", s.Behind)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	sampler.Wait()
	const limit = budget + concurrency*batch*512<<10 + 16<<20
	t.Logf("%d events, %d bytes; %d deliveries; live heap grew at most %d bytes (limit %d); cache %d bytes in %d entries; %s",
		events, stored.Load(), posts.Load(), peak.Load(), limit, cache.Bytes(), cache.Len(), peakRSS())
	if cache.Bytes() > budget {
		t.Fatalf("cache holds %d bytes, budget %d", cache.Bytes(), budget)
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("live heap grew %d bytes during the flood, more than the budget + the stated constant (%d)", p, limit)
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// peakRSS is the process's VmHWM line, for the log (the race detector's
// shadow memory is in it, so it bounds nothing here).
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "no /proc"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return "no VmHWM"
}
