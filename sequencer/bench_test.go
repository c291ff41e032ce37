package sequencer_test

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/store/storetest"
	"github.com/acrelay/acrelay/tlog"
)

// benchBatch is a group commit's worth of appends (store/postgres's
// maxGroupBatch; SQLite's writer batches as many).
const benchBatch = 64

// BenchmarkBatchTree is the "measure both" (docs/verifiable-log.md,
// "Why a sequencer"): what writing the tree in the append's transaction
// would add to a group commit. One op is one batch of 64 appends to one
// project, sent concurrently so that the store takes them as one group
// commit, then the same 64 records integrated into the project's tree:
// head and right-edge tiles read, the records read back, tlog.Integrate,
// the checkpoint signed, IntegrateTree's fenced transaction
// (sequencer.Integrate with a page of 64). Both halves are timed in each
// op, so their ratio is of one run under one load:
//
//   - append-ms/batch: the batch alone (the append paths as they are);
//   - tree-ms/batch: the integration. Written in the append's transaction
//     the tree would cost this minus one commit and the read of the 64
//     records back, and would be paid while the project's stream lock is
//     held (appends to a project already serialize on it);
//   - tree/append: the ratio; 1/(1+ratio) is the ceiling it would put on
//     one project's ingest against today's;
//
// and sign is the checkpoint signature alone (its share of tree-ms).
// Run, e.g.:
//
//	go test -run '^$' -bench BatchTree -benchtime 100x -count 5 ./sequencer
//
// with ACRELAY_TEST_DATABASE_URL set for PostgreSQL.
func BenchmarkBatchTree(b *testing.B) {
	engines := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
			return benchOpen(b, s, err)
		}},
		{"postgres", func(b *testing.B) store.Store {
			s, err := postgres.Open(ctx, pgtest.FreshDatabase(b), slog.New(slog.DiscardHandler))
			return benchOpen(b, s, err)
		}},
	}
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) { benchBatchTree(b, eng.open(b)) })
	}
	b.Run("sign", func(b *testing.B) {
		key := newKey(b)
		c := tlog.Checkpoint{Origin: "relay.test/p", Size: 1000}
		for b.Loop() {
			if _, err := tlog.SignCheckpoint(key.Signer, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchOpen[S store.Store](b *testing.B, s S, err error) store.Store {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func benchBatchTree(b *testing.B, s store.Store) {
	p, err := s.CreateProject(ctx, storetest.NewUUID())
	if err != nil {
		b.Fatal(err)
	}
	sg := storetest.NewSigner(b, p.ID).Register(b, s)
	seq := sequencer.New(s, sequencer.Options{PublicURL: "https://relay.test/", Key: newKey(b), PageSize: benchBatch})
	type signed struct {
		ev *correspondence.Event
		c  []byte
	}
	batches := make([][]signed, b.N)
	for i := range batches {
		for j := range benchBatch {
			ev, c := sg.Event(b, storetest.Spec{Summary: fmt.Sprintf("bench %d %d", i, j)})
			batches[i] = append(batches[i], signed{ev, c})
		}
	}
	var appendT, treeT time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		var wg sync.WaitGroup
		for _, x := range batches[i] {
			wg.Go(func() {
				if _, err := s.Append(ctx, x.ev, x.c); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		t1 := time.Now()
		head, err := seq.Integrate(ctx, p.ID)
		if err != nil || head.Size != int64(i+1)*benchBatch {
			b.Fatalf("integrate: %d, %v", head.Size, err)
		}
		appendT += t1.Sub(t0)
		treeT += time.Since(t1)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(appendT), "append-ms/batch")
	b.ReportMetric(ms(treeT), "tree-ms/batch")
	b.ReportMetric(float64(treeT)/float64(appendT), "tree/append")
}
