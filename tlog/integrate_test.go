package tlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

var errTileAbsent = errors.New("tile absent")

// memTiles keeps hash tiles as the store does: one data value per (L, N),
// a partial tile replaced by a wider one, read back at exactly the width
// asked (or errTileAbsent when narrower).
type memTiles map[[2]int64][]byte

func (m memTiles) store(in Integration) {
	for i, t := range in.Tiles {
		k := [2]int64{int64(t.L), t.N}
		if len(in.Data[i]) > len(m[k]) {
			m[k] = in.Data[i]
		}
	}
}

func (m memTiles) read(_ context.Context, tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d := m[[2]int64{int64(t.L), t.N}]
		if len(d) < t.W*tlog.HashSize {
			return nil, fmt.Errorf("%s: %w", TilePath(t), errTileAbsent)
		}
		out[i] = d[:t.W*tlog.HashSize]
	}
	return out, nil
}

func leaf(i int) []byte {
	return fmt.Appendf(nil, `{"event":{"n":%d},"receipt":{"received_seq":"%d"}}`, i, i+1)
}

// mth is RFC 9162 §2.1.1's Merkle Tree Hash, written from the RFC alone.
func mth(leaves [][]byte) [32]byte {
	switch n := len(leaves); n {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		l, r := mth(leaves[:k]), mth(leaves[k:])
		return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
	}
}

func node(l, r [32]byte) [32]byte { return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...)) }

// verifyInclusion is RFC 9162 §2.1.3.2, step by step.
func verifyInclusion(leafIndex, treeSize int64, leafHash [32]byte, path [][32]byte, root [32]byte) bool {
	if leafIndex >= treeSize {
		return false
	}
	fn, sn := leafIndex, treeSize-1
	r := leafHash
	for _, p := range path {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = node(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	return sn == 0 && r == root
}

// verifyConsistency is RFC 9162 §2.1.4.2, step by step (first < second).
func verifyConsistency(first, second int64, firstHash, secondHash [32]byte, path [][32]byte) bool {
	if len(path) == 0 || first >= second {
		return false
	}
	if first&(first-1) == 0 {
		path = append([][32]byte{firstHash}, path...)
	}
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	fr, sr := path[0], path[0]
	for _, c := range path[1:] {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			fr = node(c, fr)
			sr = node(c, sr)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			sr = node(sr, c)
		}
		fn >>= 1
		sn >>= 1
	}
	return fr == firstHash && sr == secondHash && sn == 0
}

func hashes(p []tlog.Hash) [][32]byte {
	out := make([][32]byte, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}

// build integrates n leaves in batches of 1, 3, 5, … (cycling to 1 after
// 255), checking each root against x/mod's TreeHash over every stored hash
// and against RFC 9162's MTH, and each tile written against x/mod's
// ReadTileData.
func build(t *testing.T, n int) memTiles {
	t.Helper()
	m := memTiles{}
	var all [][]byte
	var ref []tlog.Hash // every stored hash, computed by x/mod alone
	refReader := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = ref[x]
		}
		return out, nil
	})
	batch := 1
	for size := 0; size < n; {
		k := min(batch, n-size)
		batch += 2
		if batch > 255 {
			batch = 1
		}
		leaves := make([][]byte, k)
		for i := range leaves {
			leaves[i] = leaf(size + i)
			hs, err := tlog.StoredHashes(int64(size+i), leaves[i], refReader)
			if err != nil {
				t.Fatal(err)
			}
			ref = append(ref, hs...)
		}
		all = append(all, leaves...)
		in, err := Integrate(NewStoreHashReader(context.Background(), m.read), int64(size), leaves)
		if err != nil {
			t.Fatalf("integrate %d+%d: %v", size, k, err)
		}
		size += k
		want, err := tlog.TreeHash(int64(size), refReader)
		if err != nil {
			t.Fatal(err)
		}
		if in.Size != int64(size) || in.Root != want || [32]byte(in.Root) != mth(all) {
			t.Fatalf("size %d: got %d %v, want %v (MTH %x)", size, in.Size, in.Root, want, mth(all))
		}
		for i, tile := range in.Tiles {
			d, err := tlog.ReadTileData(tile, refReader)
			if err != nil || !bytes.Equal(d, in.Data[i]) {
				t.Fatalf("size %d tile %s differs (%v)", size, TilePath(tile), err)
			}
		}
		m.store(in)
	}
	return m
}

func TestIntegrateAgainstTreeHash(t *testing.T) {
	m := build(t, 600)
	// Every tile of the final tree reads back at its exact width.
	for _, tile := range tlog.NewTiles(TileHeight, 0, 600) {
		if _, err := m.read(context.Background(), []tlog.Tile{tile}); err != nil {
			t.Errorf("tile %s: %v", TilePath(tile), err)
		}
	}
	if got := len(m); got != 4 { // tile/0/000, 001, 002.p/88, tile/1/000.p/2
		t.Errorf("%d stored tiles, want 4", got)
	}
	in, err := Integrate(NewStoreHashReader(context.Background(), m.read), 600, nil)
	if err != nil || in.Size != 600 || len(in.Tiles) != 0 {
		t.Errorf("no leaves: %+v, %v", in, err)
	}
	if _, err := Integrate(NewStoreHashReader(context.Background(), m.read), 601, [][]byte{leaf(601)}); !errors.Is(err, errTileAbsent) {
		t.Errorf("integrate past the stored size: %v, want errTileAbsent", err)
	}
}

func TestProofsRFC9162(t *testing.T) {
	const n = 600
	m := build(t, n)
	r := NewStoreHashReader(context.Background(), m.read)
	var leaves [][]byte
	for i := range n {
		leaves = append(leaves, leaf(i))
	}
	sizes := []int64{1, 2, 3, 4, 5, 7, 8, 255, 256, 257, 300, 511, 512, 513, 599, 600}
	for _, size := range sizes {
		root, err := tlog.TreeHash(size, r)
		if err != nil {
			t.Fatal(err)
		}
		if [32]byte(root) != mth(leaves[:size]) {
			t.Fatalf("root %d differs from MTH", size)
		}
		for i := int64(0); i < size; i += 1 + size/40 {
			p, err := tlog.ProveRecord(size, i, r)
			if err != nil {
				t.Fatalf("prove %d in %d: %v", i, size, err)
			}
			lh := tlog.RecordHash(leaves[i])
			if err := tlog.CheckRecord(p, size, root, i, lh); err != nil {
				t.Errorf("x/mod rejects inclusion %d in %d: %v", i, size, err)
			}
			if !verifyInclusion(i, size, lh, hashes(p), root) {
				t.Errorf("RFC 9162 rejects inclusion %d in %d", i, size)
			}
			if len(p) > 0 {
				bad := hashes(p)
				bad[len(bad)/2][0] ^= 1
				if verifyInclusion(i, size, lh, bad, root) {
					t.Errorf("RFC 9162 accepts a changed inclusion proof %d in %d", i, size)
				}
			}
			if verifyInclusion(i, size, sha256.Sum256([]byte("other")), hashes(p), root) {
				t.Errorf("RFC 9162 accepts another leaf at %d in %d", i, size)
			}
		}
		for _, old := range sizes {
			if old >= size {
				continue
			}
			oldRoot, err := tlog.TreeHash(old, r)
			if err != nil {
				t.Fatal(err)
			}
			p, err := tlog.ProveTree(size, old, r)
			if err != nil {
				t.Fatalf("prove %d ⊑ %d: %v", old, size, err)
			}
			if err := tlog.CheckTree(p, size, root, old, oldRoot); err != nil {
				t.Errorf("x/mod rejects consistency %d ⊑ %d: %v", old, size, err)
			}
			if !verifyConsistency(old, size, oldRoot, root, hashes(p)) {
				t.Errorf("RFC 9162 rejects consistency %d ⊑ %d", old, size)
			}
			bad := hashes(p)
			bad[0][31] ^= 1
			if verifyConsistency(old, size, oldRoot, root, bad) {
				t.Errorf("RFC 9162 accepts a changed consistency proof %d ⊑ %d", old, size)
			}
			if verifyConsistency(old, size, mth(leaves[1:old+1]), root, hashes(p)) {
				t.Errorf("RFC 9162 accepts another old root %d ⊑ %d", old, size)
			}
		}
	}
}

func TestFrontierAgainstTreeHash(t *testing.T) {
	var f Frontier
	var leaves [][]byte
	if f.Root() != (tlog.Hash{}) {
		t.Fatal("empty frontier root is not zero")
	}
	for i := range 600 {
		leaves = append(leaves, leaf(i))
		f.Append(tlog.RecordHash(leaf(i)))
		if f.Size() != int64(i+1) || [32]byte(f.Root()) != mth(leaves) {
			t.Fatalf("size %d: root %v, want %x", i+1, f.Root(), mth(leaves))
		}
	}
}
