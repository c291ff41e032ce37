package couriers

import (
	"container/list"
	"context"
	"sync"

	"github.com/acrelay/acrelay/store"
)

// DefaultCacheBytes is the default budget of the couriers' shared Cache
// (`serve --courier-cache-bytes`): 64 MiB.
const DefaultCacheBytes = 64 << 20

// DefaultBatchBytes is the default Options.BatchBytes: 1 MiB.
const DefaultBatchBytes = 1 << 20

// CacheEntryOverhead is the fixed charge, in bytes, of every Cache entry
// on top of its own size: its map slot, list element and key.
const CacheEntryOverhead = 128

// recordOverhead is the fixed charge of one cached store.Record on top of
// its variable bytes: the struct itself (strings, slices, time.Time).
const recordOverhead = 176

// Cache is the couriers' one byte-budgeted cache, shared by every Runner
// (record batches) and courier (the WebSub courier's rendered bodies) of a
// process. Each entry is charged its size in bytes (RecordsBytes for a
// batch, the length of a body) plus CacheEntryOverhead; the charged total
// never exceeds the budget: a new entry evicts the least recently used
// ones until it fits, and an entry larger than the whole budget is not
// kept. Load shares one load among concurrent readers of a key.
//
// What a process holds for courier data is therefore at most the budget
// plus what its deliveries in flight hold (each Runner's Options.Concurrency
// batches of at most about Options.BatchBytes, and their rendered bodies,
// whether cached or not).
//
// Why not a library (the count-bounded caches of relay, ingest and the
// SQLite store use github.com/hashicorp/golang-lru/v2): golang-lru bounds
// entries by count, and a batch here weighs from a few KiB to megabytes,
// so a count cannot bound the memory; the caches that weigh entries
// (ristretto, otter) admit by a frequency sketch and enforce the budget
// asynchronously, so an entry may be dropped ahead of its turn and the
// total may overshoot. And golang.org/x/sync/singleflight, for the
// coalescing of Load, takes string keys and hands every waiter the
// loader's error (a load cut by its caller's context fails them all),
// where Load lets a waiter whose loader failed, or whose value is not
// fresh enough for it, load under its own context.
//
// Keys are any comparable values; each user keeps to a key type of its own
// so that users never collide. Values are never copied: callers must not
// modify what they put or get. A Cache is safe for concurrent use; the zero
// value is not usable, use NewCache.
type Cache struct {
	budget int64

	mu      sync.Mutex
	used    int64
	lru     list.List             // of *cacheEntry, most recently used first
	entries map[any]*list.Element // key → element of lru
	loading map[any]chan struct{} // a load in flight: others wait for it
}

type cacheEntry struct {
	key   any
	value any
	cost  int64 // size + CacheEntryOverhead
}

// NewCache returns an empty Cache of budget bytes; budget ≤ 0 keeps
// nothing (every Load loads).
func NewCache(budget int64) *Cache {
	return &Cache{budget: max(budget, 0), entries: map[any]*list.Element{}, loading: map[any]chan struct{}{}}
}

// Budget returns the cache's budget in bytes.
func (c *Cache) Budget() int64 { return c.budget }

// Bytes returns the bytes charged for the entries held now (≤ Budget).
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Len returns the number of entries held now.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Get returns key's value and marks it most recently used.
func (c *Cache) Get(key any) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.getLocked(key)
}

func (c *Cache) getLocked(key any) (any, bool) {
	el, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry).value, true
}

// Put stores value under key, charged size bytes (≥ 0) plus
// CacheEntryOverhead, replacing any value key had, and evicts the least
// recently used entries until the total fits the budget. It reports
// whether the value is kept: one larger than the budget is not (and key
// then has no value).
func (c *Cache) Put(key, value any, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.putLocked(key, value, size)
}

func (c *Cache) putLocked(key, value any, size int64) bool {
	if el, ok := c.entries[key]; ok {
		c.removeLocked(el)
	}
	cost := max(size, 0) + CacheEntryOverhead
	if cost > c.budget {
		return false
	}
	for c.used+cost > c.budget {
		c.removeLocked(c.lru.Back())
	}
	c.entries[key] = c.lru.PushFront(&cacheEntry{key: key, value: value, cost: cost})
	c.used += cost
	return true
}

func (c *Cache) removeLocked(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.used -= e.cost
}

// Load returns key's value when one is held and fresh accepts it (a nil
// fresh accepts any). Otherwise it calls load, once across concurrent
// callers for the same key: the others wait for that load and look again
// (taking its value, or loading themselves if it is not fresh for them or
// the load failed). A successful load's value is returned and, when keep
// is true, Put with its size. Errors are returned and not kept; a waiter
// whose ctx ends returns ctx.Err().
func (c *Cache) Load(ctx context.Context, key any, fresh func(value any) bool,
	load func(ctx context.Context) (value any, size int64, keep bool, err error)) (any, error) {
	for {
		c.mu.Lock()
		if v, ok := c.getLocked(key); ok && (fresh == nil || fresh(v)) {
			c.mu.Unlock()
			return v, nil
		}
		wait, busy := c.loading[key]
		if !busy {
			done := make(chan struct{})
			c.loading[key] = done
			c.mu.Unlock()
			v, _, _, err := c.loadOnce(ctx, key, done, load)
			return v, err
		}
		c.mu.Unlock()
		select { // another caller is loading this key: take its result
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// loadOnce runs load for the caller that owns key's loading slot done,
// keeps the result, and frees the slot even if load panics.
func (c *Cache) loadOnce(ctx context.Context, key any, done chan struct{},
	load func(ctx context.Context) (any, int64, bool, error)) (v any, size int64, keep bool, err error) {
	defer func() {
		c.mu.Lock()
		delete(c.loading, key)
		if err == nil && keep {
			c.putLocked(key, v, size)
		}
		c.mu.Unlock()
		close(done)
	}()
	return load(ctx)
}

// RecordsBytes is what a batch of records is charged in a Cache: the
// bytes of each record's fields (event, ids, kind, missing parents,
// lineage status) plus a fixed 176 per record for the struct.
func RecordsBytes(recs []store.Record) int64 {
	var n int64
	for _, r := range recs {
		n += recordOverhead + int64(len(r.ProjectID)+len(r.EventID)+len(r.RepositoryID)+len(r.ThreadID)+
			len(r.Kind)+len(r.Event)+len(r.LineageStatus))
		for _, p := range r.MissingParents {
			n += 16 + int64(len(p))
		}
	}
	return n
}

// recordKey names a batch of a project's records: those after a cursor.
type recordKey struct {
	project string
	after   int64
}

// recordsAfter returns up to limit records of projectID after the cursor
// after, sharing batches between the targets of a project that stand at
// the same cursor (a fan-out: every subscription of a topic reads the
// same batch). Records are immutable and a batch is the contiguous range
// (after, last]: it may be reused by a reader whose known head it covers,
// or when it is a full batch. A miss reads the store; concurrent misses of
// one batch read it once. Couriers must not modify the records they are
// handed.
func recordsAfter(ctx context.Context, c *Cache, st Store, projectID string, after int64, limit int, head int64) ([]store.Record, error) {
	v, err := c.Load(ctx, recordKey{projectID, after}, func(v any) bool {
		recs := v.([]store.Record)
		return len(recs) >= limit || recs[len(recs)-1].ReceivedSeq >= head
	}, func(ctx context.Context) (any, int64, bool, error) {
		recs, err := st.RecordsAfter(ctx, projectID, after, limit)
		return recs, RecordsBytes(recs), err == nil && len(recs) > 0, err
	})
	if err != nil {
		return nil, err
	}
	recs := v.([]store.Record)
	if len(recs) > limit {
		recs = recs[:limit]
	}
	return recs, nil
}
