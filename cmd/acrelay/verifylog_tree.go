package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/tlog"
)

// treeCheck verifies one project's verifiable-log tree (issue 24 item 6)
// against its records as verifyLog streams them: each leaf of the stored
// level-0 tiles must be the hash of the record with received_seq = leaf
// index + 1 (its event and receipt bytes), every higher tile must hash the
// tiles below it, the root computed from the records and the one computed
// from the tiles must be the head's, and the head's checkpoint must be
// signed by the relay's log key over that size and root. Only the leaves
// the tree holds are checked (records appended since are integrated by the
// sequencer later). Memory: one tile and O(log n) hashes.
type treeCheck struct {
	ctx    context.Context
	st     store.Store
	pid    string
	key    *tlog.LogKey // nil when the store holds no log key
	head   store.TreeHead
	report func(seq int64, format string, args ...any) // a problem at a leaf
	tree   func(format string, args ...any)            // a problem of the tree as a whole

	next     int64 // the next leaf index a record should fill
	frontier tlog.Frontier
	broken   bool // a leaf problem was reported: no root from the records
	tile     xtlog.Tile
	data     []byte
}

// add checks the leaf of one record (records come in received_seq order).
func (c *treeCheck) add(rec store.Record) {
	i := rec.ReceivedSeq - 1
	if i < c.next || i >= c.head.Size {
		return // a repeat (reported by verifyLog) or not integrated yet
	}
	if i > c.next {
		c.missing(c.next, i)
	}
	c.next = i + 1
	h := xtlog.RecordHash(rec.ImmutableJSON())
	stored, where, err := c.leaf(i)
	switch {
	case err != nil:
		c.report(rec.ReceivedSeq, "leaf %d: stored tile %s unreadable: %v", i, where, err)
		c.broken = true
	case stored != h:
		c.report(rec.ReceivedSeq, "leaf %d: the record's bytes (event and receipt) hash to %s but tile %s holds %s: the record or the tree changed after integration", i, h, where, stored)
		c.broken = true
	}
	c.frontier.Append(h)
}

// missing reports leaves from..to-1 that no stored record fills.
func (c *treeCheck) missing(from, to int64) {
	c.report(from+1, "leaf %d: no stored record with received_seq %d (%d leaf/leaves of the tree without a record here): a record was deleted after integration", from, from+1, to-from)
	c.broken = true
}

// leaf returns the stored hash of leaf i, reading its level-0 tile once.
func (c *treeCheck) leaf(i int64) (xtlog.Hash, string, error) {
	n := i / 256
	if c.data == nil || c.tile.N != n {
		c.tile = xtlog.Tile{H: tlog.TileHeight, L: 0, N: n, W: int(min(256, c.head.Size-n*256))}
		data, err := c.st.ReadTiles(c.ctx, c.pid, []xtlog.Tile{c.tile})
		if err != nil {
			c.data = nil
			return xtlog.Hash{}, tlog.TilePath(c.tile), err
		}
		c.data = data[0]
	}
	h, err := xtlog.HashFromTile(c.tile, c.data, xtlog.StoredHashIndex(0, i))
	return h, tlog.TilePath(c.tile), err
}

// finish checks what only the whole tree shows.
func (c *treeCheck) finish() {
	if c.next < c.head.Size {
		c.missing(c.next, c.head.Size)
	}
	if !c.broken && xtlog.Hash(c.head.Root) != c.frontier.Root() {
		c.tree("the root of the %d records' hashes is %s, the stored head's %s", c.head.Size, c.frontier.Root(), xtlog.Hash(c.head.Root))
	}
	r := tlog.NewStoreHashReader(c.ctx, func(ctx context.Context, tiles []xtlog.Tile) ([][]byte, error) {
		return c.st.ReadTiles(ctx, c.pid, tiles)
	})
	if root, err := xtlog.TreeHash(c.head.Size, r); err != nil {
		c.tree("root from the stored tiles: %v", err)
	} else if root != c.head.Root {
		c.tree("the root of the stored tiles is %s, the stored head's %s", root, xtlog.Hash(c.head.Root))
	}
	c.upperTiles()
	c.checkpoint()
}

// upperTiles checks that each hash of every tile above level 0 is the
// root of the full tile below it.
func (c *treeCheck) upperTiles() {
	for _, t := range xtlog.NewTiles(tlog.TileHeight, 0, c.head.Size) {
		if t.L == 0 {
			continue
		}
		data, err := c.st.ReadTiles(c.ctx, c.pid, []xtlog.Tile{t})
		if err != nil {
			c.tree("tile %s unreadable: %v", tlog.TilePath(t), err)
			continue
		}
		for j := range t.W {
			below := xtlog.Tile{H: tlog.TileHeight, L: t.L - 1, N: t.N*256 + int64(j), W: 256}
			bd, err := c.st.ReadTiles(c.ctx, c.pid, []xtlog.Tile{below})
			if err != nil {
				c.tree("tile %s unreadable: %v", tlog.TilePath(below), err)
				return
			}
			var f tlog.Frontier
			for k := range 256 {
				f.Append(xtlog.Hash(bd[0][k*32 : k*32+32]))
			}
			if got := xtlog.Hash(data[0][j*32 : j*32+32]); got != f.Root() {
				c.tree("tile %s hash %d is %s, the root of tile %s below it is %s", tlog.TilePath(t), j, got, tlog.TilePath(below), f.Root())
				return
			}
		}
	}
}

// checkpoint checks the head's signed note.
func (c *treeCheck) checkpoint() {
	if c.key == nil {
		c.tree("the store holds a tree but no log key to check its checkpoint")
		return
	}
	n, err := note.Open(c.head.Checkpoint, note.VerifierList(c.key.Verifier))
	if err != nil {
		c.tree("checkpoint is not signed by the log key %s: %v", c.key.VerifierKey, err)
		return
	}
	cp, err := tlog.ParseCheckpoint(n.Text)
	switch {
	case err != nil:
		c.tree("checkpoint: %v", err)
	case !strings.HasSuffix(cp.Origin, "/"+c.pid):
		c.tree("checkpoint origin %q is not this project's", cp.Origin)
	case cp.Size != c.head.Size || cp.Root != c.head.Root:
		c.tree("checkpoint says size %d root %s, the stored head size %d root %s", cp.Size, cp.Root, c.head.Size, xtlog.Hash(c.head.Root))
	}
}

// verifyLogKey returns the relay's log key, nil when the store has none
// (no serve has started on it).
func verifyLogKey(ctx context.Context, st store.Store) (*tlog.LogKey, error) {
	skey, err := st.LogKey(ctx, func() (string, error) { return "", errNoLogKey })
	if errors.Is(err, errNoLogKey) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, err := tlog.OpenLogKey(skey)
	if err != nil {
		return nil, fmt.Errorf("stored log key: %w", err)
	}
	return &k, nil
}
