package relay

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

// gatedFeed counts RecordsAfter reads of a real store and holds the
// first one until released, so that a burst of advances lands while a
// fan-out is running.
type gatedFeed struct {
	store.Store
	reads   atomic.Int32
	release chan struct{}
}

func (g *gatedFeed) RecordsAfter(ctx context.Context, projectID string, after int64, limit int) ([]store.Record, error) {
	if g.reads.Add(1) == 1 {
		<-g.release
	}
	return g.Store.RecordsAfter(ctx, projectID, after, limit)
}

// TestWakeBurstReadsOnce: advances that arrive while a fan-out runs are
// coalesced into one more frame, for the newest received_seq, and the
// newest record is read once per frame, not once per advance.
func TestWakeBurstReadsOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.CreateProject(ctx, "6f1c2a4e-8b3d-4c5e-9a7f-0d1e2f3a4b5c")
	if err != nil {
		t.Fatal(err)
	}
	ident, err := st.CreateIdentity(ctx, store.Identity{ID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", ProjectID: p.ID, DisplayName: "listener", Status: store.StatusActive})
	if err != nil {
		t.Fatal(err)
	}
	feed := &gatedFeed{Store: st, release: make(chan struct{})}
	h := newWakeFanout(st, slog.New(slog.DiscardHandler), -1)
	h.feed = feed
	sub, err := h.subscribe(p.ID, ident.ID, "token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.unsubscribe(sub) })

	h.advance(p.ID, 1)
	for feed.reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for seq := int64(2); seq <= 10; seq++ {
		h.advance(p.ID, seq) // the fan-out of 1 is held in its read
	}
	close(feed.release)
	var seqs []int64
	for len(seqs) < 2 {
		select {
		case f := <-sub.ch:
			seqs = append(seqs, f.seq)
			if f.newest != (wakeRecord{}) {
				t.Errorf("frame %d names a record the store does not hold: %+v", f.seq, f.newest)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("frames %v, want [1 10]", seqs)
		}
	}
	if seqs[0] != 1 || seqs[1] != 10 {
		t.Fatalf("frames %v, want [1 10]", seqs)
	}
	select {
	case f := <-sub.ch:
		t.Fatalf("a third frame, %d", f.seq)
	case <-time.After(100 * time.Millisecond):
	}
	if n := feed.reads.Load(); n != 2 {
		t.Errorf("%d reads of the newest record for two frames, want 2", n)
	}
}
