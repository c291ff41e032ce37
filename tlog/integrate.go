package tlog

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// TileReader reads hash tiles from where they are stored: data[i] holds
// exactly tiles[i].W hashes (tiles[i].W*32 bytes) of the hash tile
// (tiles[i].L, tiles[i].N), or the call fails (store.Tree.ReadTiles).
type TileReader func(ctx context.Context, tiles []tlog.Tile) ([][]byte, error)

// StoreHashReader is a tlog.HashReader over stored tiles: each ReadHashes
// call reads the tiles holding the asked hashes in one TileReader call
// (each tile at the width its highest asked hash needs) and computes the
// hashes with tlog.HashFromTile. It does not check tiles against a root:
// it serves the store's own proofs and integration, and clients check
// what it produced. Any stored size at least as large as the hashes asked
// gives the same answers (a tile's prefix never changes).
type StoreHashReader struct {
	ctx  context.Context
	read TileReader
}

// NewStoreHashReader returns a StoreHashReader calling read with ctx (a
// tlog.HashReader takes no context, so the reader carries the caller's).
func NewStoreHashReader(ctx context.Context, read TileReader) *StoreHashReader {
	return &StoreHashReader{ctx: ctx, read: read}
}

// ReadHashes implements tlog.HashReader: one hash per stored-hash index, in
// order.
func (r *StoreHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	type key struct {
		l int
		n int64
	}
	pos := make(map[key]int)
	var tiles []tlog.Tile
	for _, x := range indexes {
		t := tlog.TileForIndex(TileHeight, x)
		k := key{t.L, t.N}
		if i, ok := pos[k]; ok {
			tiles[i].W = max(tiles[i].W, t.W)
			continue
		}
		pos[k] = len(tiles)
		tiles = append(tiles, t)
	}
	if len(tiles) == 0 {
		return nil, nil
	}
	data, err := r.read(r.ctx, tiles)
	if err != nil {
		return nil, fmt.Errorf("read tiles: %w", err)
	}
	if len(data) != len(tiles) {
		return nil, fmt.Errorf("read tiles: %d results for %d tiles", len(data), len(tiles))
	}
	hashes := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		t := tlog.TileForIndex(TileHeight, x)
		j := pos[key{t.L, t.N}]
		h, err := tlog.HashFromTile(tiles[j], data[j], x)
		if err != nil {
			return nil, err
		}
		hashes[i] = h
	}
	return hashes, nil
}

// Integration is the result of appending leaves to a tree: the new size
// and root, and the hash tiles that changed (full tiles that became full,
// and the new partial tiles on the right edge, each at its new width), with
// their data (Data[i] is Tiles[i].W*32 bytes). Storing them next to the
// old tiles gives the tree of Size leaves.
type Integration struct {
	Size  int64
	Root  tlog.Hash
	Tiles []tlog.Tile
	Data  [][]byte
}

// ErrBadSize: Integrate was called with a negative old size.
var ErrBadSize = errors.New("negative tree size")

// Integrate appends leaves (leaf bytes, in order, leaf oldSize first) to
// the tree of oldSize leaves whose stored hashes r reads, and returns the
// new tree's size, root and changed tiles. r is asked only for hashes of
// the old tree (its right edge), in a few batched calls. With no leaves the
// result is the old tree's root and no tiles. Memory is proportional to
// len(leaves): callers integrate in pages (the sequencer uses ≤ 1000).
func Integrate(r tlog.HashReader, oldSize int64, leaves [][]byte) (Integration, error) {
	if oldSize < 0 {
		return Integration{}, ErrBadSize
	}
	newSize := oldSize + int64(len(leaves))
	base := tlog.StoredHashCount(oldSize)
	var fresh []tlog.Hash // stored hashes base, base+1, …
	hr := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		var old []int64
		for _, x := range indexes {
			if x < base {
				old = append(old, x)
			}
		}
		var oldHashes []tlog.Hash
		if len(old) > 0 {
			var err error
			if oldHashes, err = r.ReadHashes(old); err != nil {
				return nil, err
			}
			if len(oldHashes) != len(old) {
				return nil, fmt.Errorf("hash reader: %d hashes for %d indexes", len(oldHashes), len(old))
			}
		}
		for i, x := range indexes {
			switch {
			case x < base:
				out[i], oldHashes = oldHashes[0], oldHashes[1:]
			case x-base < int64(len(fresh)):
				out[i] = fresh[x-base]
			default:
				return nil, fmt.Errorf("hash %d not yet computed", x)
			}
		}
		return out, nil
	})
	for i, leaf := range leaves {
		hs, err := tlog.StoredHashes(oldSize+int64(i), leaf, hr)
		if err != nil {
			return Integration{}, fmt.Errorf("leaf %d: %w", oldSize+int64(i), err)
		}
		fresh = append(fresh, hs...)
	}
	root, err := tlog.TreeHash(newSize, hr)
	if err != nil {
		return Integration{}, fmt.Errorf("tree hash %d: %w", newSize, err)
	}
	in := Integration{Size: newSize, Root: root, Tiles: tlog.NewTiles(TileHeight, oldSize, newSize)}
	for _, t := range in.Tiles {
		d, err := tlog.ReadTileData(t, hr)
		if err != nil {
			return Integration{}, fmt.Errorf("tile %s: %w", TilePath(t), err)
		}
		in.Data = append(in.Data, d)
	}
	return in, nil
}
