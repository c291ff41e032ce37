package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

var treeTests = []struct {
	name string
	fn   func(t *testing.T, s store.Store)
}{
	{"tree/integrate_and_read", testTreeIntegrate},
	{"tree/fenced", testTreeFenced},
	{"tree/tiles", testTreeTiles},
	{"tree/log_key", testTreeLogKey},
}

func treeLeaf(project string, i int) []byte {
	return fmt.Appendf(nil, `{"event":{"p":%q,"n":%d},"receipt":{"received_seq":"%d"}}`, project, i, i+1)
}

// integrateLeaves appends n leaves to the project's stored tree through
// package tlog, as the sequencer does, and returns the new head.
func integrateLeaves(t *testing.T, s store.Store, project string, from, n int) store.TreeHead {
	t.Helper()
	var leaves [][]byte
	for i := from; i < from+n; i++ {
		leaves = append(leaves, treeLeaf(project, i))
	}
	r := tlog.NewStoreHashReader(ctx, func(ctx context.Context, tiles []xtlog.Tile) ([][]byte, error) {
		return s.ReadTiles(ctx, project, tiles)
	})
	in, err := tlog.Integrate(r, int64(from), leaves)
	if err != nil {
		t.Fatalf("integrate %d+%d: %v", from, n, err)
	}
	head := store.TreeHead{Size: in.Size, Root: in.Root, Checkpoint: fmt.Appendf(nil, "checkpoint %d\n", in.Size)}
	if err := s.IntegrateTree(ctx, project, int64(from), in.Tiles, in.Data, head); err != nil {
		t.Fatalf("store %d+%d: %v", from, n, err)
	}
	return head
}

// refRoot is x/mod's tree hash over hashes computed in memory.
func refRoot(t *testing.T, project string, n int) xtlog.Hash {
	t.Helper()
	var hs []xtlog.Hash
	r := xtlog.HashReaderFunc(func(ix []int64) ([]xtlog.Hash, error) {
		out := make([]xtlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = hs[x]
		}
		return out, nil
	})
	for i := range n {
		h, err := xtlog.StoredHashes(int64(i), treeLeaf(project, i), r)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h...)
	}
	root, err := xtlog.TreeHash(int64(n), r)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testTreeIntegrate(t *testing.T, s store.Store) {
	p, q := NewUUID(), NewUUID()
	if h, err := s.TreeHead(ctx, p); err != nil || h.Size != 0 || h.Root != [32]byte{} || h.Checkpoint != nil || !h.UpdatedAt.IsZero() {
		t.Fatalf("head before the first integration: %+v, %v", h, err)
	}
	size := 0
	for _, n := range []int{1, 2, 253, 1, 300, 3, 700} {
		before := time.Now().Add(-time.Second)
		head := integrateLeaves(t, s, p, size, n)
		size += n
		got, err := s.TreeHead(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Size != int64(size) || got.Root != head.Root || !bytes.Equal(got.Checkpoint, head.Checkpoint) ||
			got.UpdatedAt.Before(before) || got.UpdatedAt.Location() != time.UTC {
			t.Fatalf("head after %d: %+v, want size %d root %x", size, got, size, head.Root)
		}
		if want := refRoot(t, p, size); got.Root != want {
			t.Fatalf("root at %d = %x, want %x", size, got.Root, want)
		}
	}
	// Another project's tree is its own.
	integrateLeaves(t, s, q, 0, 5)
	if h, _ := s.TreeHead(ctx, q); h.Size != 5 || h.Root != refRoot(t, q, 5) {
		t.Fatalf("second project head %+v", h)
	}
	// Proofs from the stored tiles verify, at the final and earlier sizes.
	r := tlog.NewStoreHashReader(ctx, func(ctx context.Context, tiles []xtlog.Tile) ([][]byte, error) {
		return s.ReadTiles(ctx, p, tiles)
	})
	for _, n := range []int64{1, 256, 559, int64(size)} {
		root, err := xtlog.TreeHash(n, r)
		if err != nil || root != refRoot(t, p, int(n)) {
			t.Fatalf("tree hash %d from stored tiles: %x, %v", n, root, err)
		}
		for _, i := range []int64{0, n / 2, n - 1} {
			pr, err := xtlog.ProveRecord(n, i, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := xtlog.CheckRecord(pr, n, root, i, xtlog.RecordHash(treeLeaf(p, int(i)))); err != nil {
				t.Errorf("inclusion %d in %d: %v", i, n, err)
			}
		}
		tp, err := xtlog.ProveTree(int64(size), n, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := xtlog.CheckTree(tp, int64(size), refRoot(t, p, size), n, root); err != nil {
			t.Errorf("consistency %d ⊑ %d: %v", n, size, err)
		}
	}
}

func testTreeFenced(t *testing.T, s store.Store) {
	p := NewUUID()
	integrateLeaves(t, s, p, 0, 10)
	head, _ := s.TreeHead(ctx, p)
	stale := store.TreeHead{Size: 12, Root: [32]byte{1}, Checkpoint: []byte("stale")}
	for _, old := range []int64{0, 9, 11} {
		if err := s.IntegrateTree(ctx, p, old, nil, nil, stale); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("integrate from %d at size 10: %v, want ErrConflict", old, err)
		}
	}
	if err := s.IntegrateTree(ctx, p, 10, nil, nil, store.TreeHead{Size: 9, Checkpoint: []byte("c")}); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("a smaller head: %v, want an argument error", err)
	}
	bad := []xtlog.Tile{{H: 8, L: 0, N: 0, W: 2}}
	if err := s.IntegrateTree(ctx, p, 10, bad, [][]byte{make([]byte, 32)}, stale); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("data shorter than the tile: %v, want an argument error", err)
	}
	if got, _ := s.TreeHead(ctx, p); got.Size != 10 || got.Root != head.Root || !bytes.Equal(got.Checkpoint, head.Checkpoint) {
		t.Fatalf("head changed by refused integrations: %+v", got)
	}
	// Concurrent integrators from one size: exactly one wins, on a new
	// project (the first insert) and on an existing one (the update).
	for _, from := range []int64{0, 10} {
		pid := p
		if from == 0 {
			pid = NewUUID()
		}
		var won, lost atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := store.TreeHead{Size: from + 1 + int64(i), Root: [32]byte{byte(i)}, Checkpoint: []byte{byte(i)}}
				switch err := s.IntegrateTree(ctx, pid, from, nil, nil, h); {
				case err == nil:
					won.Add(1)
				case errors.Is(err, store.ErrConflict):
					lost.Add(1)
				default:
					t.Errorf("concurrent integrate: %v", err)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 1 || lost.Load() != 7 {
			t.Fatalf("from %d: %d won, %d lost; want 1 and 7", from, won.Load(), lost.Load())
		}
	}
}

func testTreeTiles(t *testing.T, s store.Store) {
	p := NewUUID()
	full := bytes.Repeat([]byte{0xaa}, 256*32)
	part := bytes.Repeat([]byte{0xbb}, 3*32)
	t0 := xtlog.Tile{H: 8, L: 0, N: 0, W: 256}
	t1 := xtlog.Tile{H: 8, L: 0, N: 1, W: 3}
	up := xtlog.Tile{H: 8, L: 1, N: 0, W: 1}
	upData := bytes.Repeat([]byte{0xcc}, 32)
	if err := s.IntegrateTree(ctx, p, 0, []xtlog.Tile{t0, t1, up}, [][]byte{full, part, upData}, store.TreeHead{Size: 259, Checkpoint: []byte("c")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadTiles(ctx, p, []xtlog.Tile{t1, t0, {H: 8, L: 0, N: 1, W: 2}, up})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[0], part) || !bytes.Equal(got[1], full) || !bytes.Equal(got[2], part[:64]) || !bytes.Equal(got[3], upData) {
		t.Fatalf("tiles read back differ")
	}
	for _, missing := range []xtlog.Tile{{H: 8, L: 0, N: 1, W: 4}, {H: 8, L: 0, N: 2, W: 1}, {H: 8, L: 2, N: 0, W: 1}, {H: 8, L: -1, N: 0, W: 1}} {
		if _, err := s.ReadTiles(ctx, p, []xtlog.Tile{t0, missing}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("read %s: %v, want ErrNotFound", tlog.TilePath(missing), err)
		}
	}
	if _, err := s.ReadTiles(ctx, NewUUID(), []xtlog.Tile{t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another project's tile: %v, want ErrNotFound", err)
	}
	// A wider partial tile replaces the narrower; a narrower one (or a
	// changed full tile) never replaces what is stored.
	wider := bytes.Repeat([]byte{0xdd}, 5*32)
	narrow := bytes.Repeat([]byte{0xee}, 32)
	err = s.IntegrateTree(ctx, p, 259, []xtlog.Tile{{H: 8, L: 0, N: 1, W: 5}, {H: 8, L: 0, N: 0, W: 1}}, [][]byte{wider, narrow}, store.TreeHead{Size: 261, Checkpoint: []byte("c")})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.ReadTiles(ctx, p, []xtlog.Tile{{H: 8, L: 0, N: 1, W: 5}, t0})
	if err != nil || !bytes.Equal(got[0], wider) || !bytes.Equal(got[1], full) {
		t.Fatalf("after the wider tile: %v", err)
	}
}

func testTreeLogKey(t *testing.T, s store.Store) {
	var created atomic.Int32
	keys := make([]string, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := s.LogKey(ctx, func() (string, error) {
				created.Add(1)
				return fmt.Sprintf("PRIVATE+KEY+test+%d", i), nil
			})
			if err != nil {
				t.Errorf("log key: %v", err)
			}
			keys[i] = k
		}()
	}
	wg.Wait()
	if created.Load() < 1 || keys[0] == "" {
		t.Fatalf("no key created: %q", keys)
	}
	for _, k := range keys {
		if k != keys[0] {
			t.Fatalf("concurrent first calls returned different keys: %q", keys)
		}
	}
	boom := errors.New("not called")
	k, err := s.LogKey(ctx, func() (string, error) { return "", boom })
	if err != nil || k != keys[0] {
		t.Fatalf("second call: %q, %v; want %q", k, err, keys[0])
	}
}
