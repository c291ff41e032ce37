package postgres_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/storetest"
)

// commits records the group commits a store reports.
type commits struct {
	mu    sync.Mutex
	sizes []int
}

func (c *commits) ObserveTx(string, time.Duration, error) {}
func (c *commits) ObserveGroupCommit(n int, _ time.Duration, _ error) {
	c.mu.Lock()
	c.sizes = append(c.sizes, n)
	c.mu.Unlock()
}

// TestAppendPageAtOneGroupCommit: a page of 150 foreign records (above the
// project batch cap of 64) with an unknown sender among them is one group
// commit of 150 appends; the others are stored in page order.
func TestAppendPageAtOneGroupCommit(t *testing.T) {
	ctx := context.Background()
	obs := &commits{}
	db, err := postgres.OpenWith(ctx, freshDatabase(t), slog.New(slog.DiscardHandler), postgres.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := db.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		t.Fatal(err)
	}
	sg := storetest.NewSigner(t, p.ID).Register(t, db)
	stranger := storetest.NewSigner(t, p.ID)
	page := make([]store.ForeignAppend, 150)
	ids := make([]string, len(page))
	at := time.Now()
	for i := range page {
		ev, c := sg.Event(t, storetest.Spec{})
		page[i], ids[i] = store.ForeignAppend{Event: ev, Canonical: c, At: at}, ev.ID
	}
	page[70].Event, page[70].Canonical = stranger.Event(t, storetest.Spec{})
	obs.mu.Lock()
	obs.sizes = nil
	obs.mu.Unlock()
	out := db.AppendPageAt(ctx, page)
	seq := int64(0)
	for i, o := range out {
		if i == 70 {
			if !errors.Is(o.Err, store.ErrSenderNotActive) {
				t.Fatalf("record 70: %v, want ErrSenderNotActive", o.Err)
			}
			continue
		}
		seq++
		if o.Err != nil || !o.Result.Created || o.Result.Record.ReceivedSeq != seq || o.Result.Record.EventID != ids[i] {
			t.Fatalf("record %d: %+v %v, want stored as %d", i, o.Result.Record, o.Err, seq)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.sizes) != 1 || obs.sizes[0] != 150 {
		t.Fatalf("group commits %v, want one of 150", obs.sizes)
	}
}
