package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
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
// default MaxBatch of 128) with an unknown sender among them is one group
// commit of 150 appends; the others are stored in page order.
func TestAppendPageAtOneGroupCommit(t *testing.T) {
	obs := &commits{}
	db, err := sqlite.OpenWith(context.Background(), filepath.Join(t.TempDir(), "a.db"), discard, sqlite.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sg, evs := setup(t, db, 150)
	stranger := storetest.NewSigner(t, sg.ProjectID)
	page := make([]store.ForeignAppend, len(evs))
	at := time.Now()
	for i, e := range evs {
		page[i] = store.ForeignAppend{Event: e.ev, Canonical: e.c, At: at}
	}
	page[70].Event, page[70].Canonical = stranger.Event(t, storetest.Spec{})
	obs.mu.Lock()
	obs.sizes = nil
	obs.mu.Unlock()
	out := db.AppendPageAt(context.Background(), page)
	seq := int64(0)
	for i, o := range out {
		if i == 70 {
			if !errors.Is(o.Err, store.ErrSenderNotActive) {
				t.Fatalf("record 70: %v, want ErrSenderNotActive", o.Err)
			}
			continue
		}
		seq++
		if o.Err != nil || !o.Result.Created || o.Result.Record.ReceivedSeq != seq || o.Result.Record.EventID != evs[i].ev.ID {
			t.Fatalf("record %d: %+v %v, want stored as %d", i, o.Result.Record, o.Err, seq)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.sizes) != 1 || obs.sizes[0] != 150 {
		t.Fatalf("group commits %v, want one of 150", obs.sizes)
	}
}
