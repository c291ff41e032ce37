package sqlite_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
)

var discard = slog.New(slog.DiscardHandler)

type signed struct {
	ev *correspondence.Event
	c  []byte
}

func setup(t testing.TB, db store.Store, n int) (*storetest.Signer, []signed) {
	t.Helper()
	ctx := context.Background()
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	sg := storetest.NewSigner(t, p.ID).Register(t, db)
	evs := make([]signed, n)
	for i := range evs {
		evs[i].ev, evs[i].c = sg.Event(t, storetest.Spec{})
	}
	return sg, evs
}

// TestBatchIsolatesFailures: appends refused inside a batch (unknown
// sender) roll back to their own savepoint; the others in the same
// transaction commit.
func TestBatchIsolatesFailures(t *testing.T) {
	db := openTemp(t)
	sg, good := setup(t, db, 64)
	stranger := storetest.NewSigner(t, sg.ProjectID)
	var wg sync.WaitGroup
	var okCount, refused atomic.Int64
	for i := range good {
		bad, bc := stranger.Event(t, storetest.Spec{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := db.Append(context.Background(), good[i].ev, good[i].c); err != nil {
				t.Errorf("good append: %v", err)
				return
			}
			okCount.Add(1)
		}()
		go func() {
			defer wg.Done()
			_, err := db.Append(context.Background(), bad, bc)
			if !errors.Is(err, store.ErrSenderNotActive) {
				t.Errorf("bad append: %v", err)
				return
			}
			refused.Add(1)
		}()
	}
	wg.Wait()
	if seq, _, _ := db.Head(context.Background(), sg.ProjectID); seq != 64 || okCount.Load() != 64 || refused.Load() != 64 {
		t.Fatalf("head %d, ok %d, refused %d", seq, okCount.Load(), refused.Load())
	}
}

// TestCancelledCallersCorruptNothing: callers whose ctx ends while queued
// get ctx's error; each of their events is then either stored exactly once
// or not at all, and an exact retry settles which.
func TestCancelledCallersCorruptNothing(t *testing.T) {
	db := openTemp(t)
	sg, evs := setup(t, db, 200)
	ctx := context.Background()

	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.Append(done, evs[0].ev, evs[0].c); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled ctx: %v", err)
	}

	var wg sync.WaitGroup
	var timedOut atomic.Int64
	for i := range evs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, time.Duration(i%7)*300*time.Microsecond)
			defer cancel()
			if _, err := db.Append(c, evs[i].ev, evs[i].c); err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("append %d: %v", i, err)
				}
				timedOut.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d callers gave up", timedOut.Load(), len(evs))
	// A job that had started when its caller gave up still commits, so
	// settle with exact retries: afterwards every event is stored exactly
	// once, at consecutive receipts.
	for i := range evs {
		if _, err := db.Append(ctx, evs[i].ev, evs[i].c); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	after := int64(0)
	for {
		page, err := db.Events(ctx, store.EventQuery{ProjectID: sg.ProjectID, RepositoryID: "repo-1", After: after, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			if seen[r.EventID] || r.ReceivedSeq != int64(len(seen)+1) {
				t.Fatalf("record %s at %d after %d distinct", r.EventID, r.ReceivedSeq, len(seen))
			}
			seen[r.EventID] = true
			after = r.ReceivedSeq
		}
		if !page.HasMore {
			break
		}
	}
	if head, _, _ := db.Head(ctx, sg.ProjectID); len(seen) != len(evs) || head != int64(len(evs)) {
		t.Fatalf("%d distinct records, head %d; want %d", len(seen), head, len(evs))
	}
}

// TestCloseDrainsAndReopens: Close lets queued appends finish; every
// append that returned a receipt is there after reopening the file, and
// appends after Close get ErrUnavailable.
func TestCloseDrainsAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acrelay.db")
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path, discard)
	if err != nil {
		t.Fatal(err)
	}
	sg, evs := setup(t, db, 300)
	var wg sync.WaitGroup
	var mu sync.Mutex
	receipts := map[string]int64{}
	for i := range evs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := db.Append(ctx, evs[i].ev, evs[i].c)
			if err != nil {
				if !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("append %d: %v", i, err)
				}
				return
			}
			mu.Lock()
			receipts[res.Record.EventID] = res.Record.ReceivedSeq
			mu.Unlock()
		}()
	}
	time.Sleep(2 * time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := db.Append(ctx, evs[0].ev, evs[0].c); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("append after close: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	db, err = sqlite.Open(ctx, path, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	seq, _, err := db.Head(ctx, sg.ProjectID)
	if err != nil || seq != int64(len(receipts)) {
		t.Fatalf("head after reopen %d %v, want %d receipts", seq, err, len(receipts))
	}
	page, err := db.Events(ctx, store.EventQuery{ProjectID: sg.ProjectID, RepositoryID: "repo-1", Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Records {
		if receipts[r.EventID] != r.ReceivedSeq {
			t.Fatalf("%s stored at %d, receipt said %d", r.EventID, r.ReceivedSeq, receipts[r.EventID])
		}
	}
	t.Logf("%d appends committed before close", len(receipts))
}

func TestOpenRefusesURIPaths(t *testing.T) {
	for _, p := range []string{"", "file:x.db", "x.db?mode=ro"} {
		if _, err := sqlite.Open(context.Background(), p, discard); err == nil {
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

func benchmarkAppend(b *testing.B, maxBatch int) {
	db, err := sqlite.OpenWith(context.Background(), filepath.Join(b.TempDir(), "bench.db"), discard, sqlite.Options{MaxBatch: maxBatch})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	p, err := db.CreateProject(context.Background(), storetest.NewUUID())
	if err != nil {
		b.Fatal(err)
	}
	base := storetest.NewSigner(b, p.ID).Register(b, db)
	// Sign outside the timed loop: the benchmark measures the store.
	evs := make([]signed, b.N)
	for i := range evs {
		evs[i].ev, evs[i].c = base.Event(b, storetest.Spec{})
	}
	var next atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(evs)) {
					return
				}
				if _, err := db.Append(context.Background(), evs[i].ev, evs[i].c); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAppendParallel: 16 goroutines appending through group commit.
func BenchmarkAppendParallel(b *testing.B) { benchmarkAppend(b, 0) }

// BenchmarkAppendOneTxPerEvent: the same load with MaxBatch 1, one
// transaction and one fsync per event.
func BenchmarkAppendOneTxPerEvent(b *testing.B) { benchmarkAppend(b, 1) }
