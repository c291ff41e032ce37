package couriers_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/internal/teststore"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// TestCacheEvictsLeastRecentlyUsedByBytes: entries are charged their size
// plus CacheEntryOverhead, the total never passes the budget, and a new
// entry evicts the least recently used (a Get refreshes) until it fits.
func TestCacheEvictsLeastRecentlyUsedByBytes(t *testing.T) {
	const size = 1000 - couriers.CacheEntryOverhead // each entry costs 1000
	c := couriers.NewCache(3000)
	for _, k := range []string{"a", "b", "c"} {
		if !c.Put(k, k, size) {
			t.Fatalf("Put(%s) not kept", k)
		}
	}
	if c.Bytes() != 3000 || c.Len() != 3 {
		t.Fatalf("Bytes %d, Len %d; want 3000, 3", c.Bytes(), c.Len())
	}
	if v, ok := c.Get("a"); !ok || v != "a" { // a is now the most recent
		t.Fatalf("Get(a) = %v, %v", v, ok)
	}
	c.Put("d", "d", size) // evicts b, the least recently used
	if _, ok := c.Get("b"); ok {
		t.Fatal("b kept; it was the least recently used")
	}
	c.Put("e", "e", 2*size+couriers.CacheEntryOverhead) // costs 2000: evicts c, then a
	got := []string{}
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if _, ok := c.Get(k); ok {
			got = append(got, k)
		}
	}
	if strings.Join(got, ",") != "d,e" || c.Bytes() != 3000 {
		t.Fatalf("held %v, %d bytes; want d,e and 3000", got, c.Bytes())
	}
	// Replacing a key recharges it; one larger than the budget is not
	// kept and drops the key's old value.
	c.Put("d", "d2", 0)
	if c.Bytes() != 2000+couriers.CacheEntryOverhead {
		t.Fatalf("Bytes %d after replacing d with a 0-byte value", c.Bytes())
	}
	if c.Put("e", "huge", 3000) {
		t.Fatal("an entry larger than the budget was kept")
	}
	if _, ok := c.Get("e"); ok || c.Bytes() != couriers.CacheEntryOverhead || c.Len() != 1 {
		t.Fatalf("after a refused Put: Bytes %d, Len %d", c.Bytes(), c.Len())
	}
	if couriers.NewCache(0).Put("x", "x", 0) {
		t.Fatal("a cache of budget 0 kept an entry")
	}
}

// TestCacheMatchesAnLRUModel: random Puts and Gets against a list model of
// an LRU by bytes: the same keys are held, and Bytes never passes the
// budget.
func TestCacheMatchesAnLRUModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		budget := rapid.Int64Range(0, 5000).Draw(t, "budget")
		c := couriers.NewCache(budget)
		type ent struct {
			k    int
			cost int64
		}
		var model []ent // most recent first
		find := func(k int) int {
			for i, e := range model {
				if e.k == k {
					return i
				}
			}
			return -1
		}
		for range rapid.IntRange(1, 60).Draw(t, "ops") {
			k := rapid.IntRange(0, 8).Draw(t, "key")
			if rapid.Bool().Draw(t, "put") {
				size := rapid.Int64Range(0, 1500).Draw(t, "size")
				kept := c.Put(k, k, size)
				if i := find(k); i >= 0 {
					model = append(model[:i], model[i+1:]...)
				}
				cost := size + couriers.CacheEntryOverhead
				if want := cost <= budget; kept != want {
					t.Fatalf("Put(%d, %d bytes) kept %v, want %v", k, size, kept, want)
				}
				if kept {
					var used int64
					for _, e := range model {
						used += e.cost
					}
					for used+cost > budget {
						used -= model[len(model)-1].cost
						model = model[:len(model)-1]
					}
					model = append([]ent{{k, cost}}, model...)
				}
			} else {
				_, ok := c.Get(k)
				i := find(k)
				if ok != (i >= 0) {
					t.Fatalf("Get(%d) = %v, model %v", k, ok, i >= 0)
				}
				if i >= 0 {
					e := model[i]
					model = append(model[:i], model[i+1:]...)
					model = append([]ent{e}, model...)
				}
			}
			var used int64
			for _, e := range model {
				used += e.cost
			}
			if c.Bytes() != used || c.Len() != len(model) || c.Bytes() > budget {
				t.Fatalf("Bytes %d Len %d; model %d bytes, %d entries; budget %d", c.Bytes(), c.Len(), used, len(model), budget)
			}
		}
	})
}

// TestCacheLoadIsSingleFlight: concurrent Loads of one key run one load
// and share its value; a failed load is not kept; a value that is not
// fresh for a reader is loaded again.
func TestCacheLoadIsSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := couriers.NewCache(1 << 20)
		ctx := context.Background()
		var loads atomic.Int64
		release := make(chan struct{})
		load := func(context.Context) (any, int64, bool, error) {
			loads.Add(1)
			<-release
			return "v1", 2, true, nil
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				v, err := c.Load(ctx, "k", nil, load)
				if err != nil || v != "v1" {
					t.Errorf("Load = %v, %v", v, err)
				}
			})
		}
		synctest.Wait() // all 16 are blocked: one in the load, 15 queued on it
		close(release)
		wg.Wait()
		if n := loads.Load(); n != 1 {
			t.Fatalf("%d loads for 16 concurrent readers of one key", n)
		}
		v, err := c.Load(ctx, "k", func(v any) bool { return v != "v1" }, func(context.Context) (any, int64, bool, error) {
			return "v2", 2, true, nil
		})
		if err != nil || v != "v2" {
			t.Fatalf("a stale value was not reloaded: %v, %v", v, err)
		}
		boom := errors.New("boom")
		if _, err := c.Load(ctx, "e", nil, func(context.Context) (any, int64, bool, error) { return nil, 0, true, boom }); !errors.Is(err, boom) {
			t.Fatalf("Load error %v", err)
		}
		if _, ok := c.Get("e"); ok {
			t.Fatal("a failed load was kept")
		}
		if c.Bytes() != 2+couriers.CacheEntryOverhead {
			t.Fatalf("Bytes %d", c.Bytes())
		}
	})
}

// appendBig appends n events of about 64 KiB each (64 paths of 230
// four-byte scalars and a 1000-scalar summary, under the 65536-byte
// event cap) and returns the bytes stored.
func appendBig(t *testing.T, st store.Store, s *storetest.Signer, n int) int {
	t.Helper()
	var paths []string
	for i := range 64 {
		paths = append(paths, fmt.Sprintf("p%02d/%s", i, strings.Repeat("𝔸", 230)))
	}
	total := 0
	for range n {
		ev, raw := s.Event(t, storetest.Spec{Paths: paths, Summary: strings.Repeat("𝔸", 1000)})
		if _, err := st.Append(context.Background(), ev, raw); err != nil {
			t.Fatal(err)
		}
		total += len(raw)
	}
	return total
}

// laggards is a courier whose target i accepts the first i batches of
// `batch` records after `base`, then fails every delivery: the targets
// stand at 64 different cursors, each having read its own batch.
type laggards struct {
	base, batch int64
	failed      sync.Map // target id → true once it failed
	nFailed     atomic.Int64
	targets     []couriers.Target
	feed        store.Feed
}

func (l *laggards) Name() string { return "laggards" }
func (l *laggards) Projects(ctx context.Context) ([]string, error) {
	return couriers.Export{Feed: l.feed}.Projects(ctx)
}
func (l *laggards) Targets(context.Context, string) ([]couriers.Target, error) { return l.targets, nil }
func (l *laggards) Deliver(_ context.Context, _ string, t couriers.Target, recs []store.Record) error {
	var i int64
	fmt.Sscanf(t.ID, "t%d", &i)
	if recs[0].ReceivedSeq > l.base+i*l.batch {
		if _, dup := l.failed.LoadOrStore(t.ID, true); !dup {
			l.nFailed.Add(1)
		}
		return errors.New("lagging")
	}
	return nil
}

// TestCacheBoundsRunnerMemoryByBytes: 64 targets of one project lag at 64
// different cursors, each having read a batch of 10 records of 64 KiB
// (64 batches, 40 MiB). The old cache kept its last 64 batches whatever
// their size, so all of it stayed on the heap; the shared Cache keeps at
// most its budget (4 MiB here), and the live heap grows by at most the
// budget plus 8 MiB (the runner's state and the test's, measured at about
// 1 MiB).
func TestCacheBoundsRunnerMemoryByBytes(t *testing.T) {
	st := teststore.SQLite(t)
	s := newProject(t, st)
	const targets, batch = 64, 10
	base, _, err := st.Head(context.Background(), s.ProjectID)
	if err != nil {
		t.Fatal(err)
	}
	stored := appendBig(t, st, s, targets*batch)
	l := &laggards{base: base, batch: batch, feed: st}
	for i := range targets {
		l.targets = append(l.targets, couriers.Target{ID: fmt.Sprintf("t%02d", i)})
	}
	const budget = 4 << 20
	cache := couriers.NewCache(budget)
	r := couriers.NewRunner(st, l, couriers.Options{Holder: "h", LeaseTTL: 3 * time.Second, Batch: batch, Concurrency: 4,
		Backoff: couriers.Backoff{Initial: time.Hour, Max: time.Hour}, Cache: cache})
	before := liveHeap()
	start(t, r)
	waitFor(t, "every target to fail at its cursor", func() bool { return l.nFailed.Load() == targets })
	waitFor(t, "the workers to end", func() bool { return r.Status().Failing == targets })
	grown := liveHeap() - before
	t.Logf("stored %d bytes in %d records; cache holds %d bytes in %d batches; live heap grew %d bytes",
		stored, targets*batch, cache.Bytes(), cache.Len(), grown)
	if cache.Bytes() > budget {
		t.Fatalf("cache holds %d bytes, budget %d", cache.Bytes(), budget)
	}
	if limit := int64(budget + 8<<20); grown > limit {
		t.Fatalf("live heap grew %d bytes, more than the budget + 8 MiB (%d)", grown, limit)
	}
}

// liveHeap returns the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestBatchesAreCutByBytes: with BatchBytes of 150,000, records of about
// 64 KiB go out three at a time (the third brings a batch past the
// limit), whatever Batch allows, and a failed batch is retried as exactly
// those three.
func TestBatchesAreCutByBytes(t *testing.T) {
	st := teststore.SQLite(t)
	s := newProject(t, st)
	appendBig(t, st, s, 10)
	recs, err := st.RecordsAfter(context.Background(), s.ProjectID, 0, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("RecordsAfter: %d, %v", len(recs), err)
	}
	if one := couriers.RecordsBytes(recs); 2*one >= 150_000 || 3*one < 150_000 {
		t.Fatalf("a record is charged %d bytes; the test wants 2 under 150,000 and 3 over", one)
	}
	var mu sync.Mutex
	var batches []int
	var firstIDs, retryIDs string
	rec := newRecorder(st, "t")
	r := couriers.NewRunner(st, &batchRecorder{recorder: rec, record: func(ids []string) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, len(ids))
		switch len(batches) {
		case 1:
			firstIDs = strings.Join(ids, ",")
			return errors.New("callback answered 503")
		case 2:
			retryIDs = strings.Join(ids, ",")
		}
		return nil
	}}, couriers.Options{Holder: "h", LeaseTTL: 3 * time.Second, Backoff: fast, BatchBytes: 150_000})
	start(t, r)
	waitFor(t, "five batches", func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 5 })
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(batches); got != "[3 3 3 3 1]" {
		t.Fatalf("batch sizes %s, want [3 3 3 3 1] (a failed 3, its retry, 3, 3, 1)", got)
	}
	if retryIDs != firstIDs {
		t.Fatalf("the retry was %s, the failed batch %s", retryIDs, firstIDs)
	}
}
