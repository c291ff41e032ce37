package store

import (
	"context"
	"errors"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// ErrConflict: IntegrateTree found the project's stored tree at another
// size than the caller's old size (another sequencer integrated first, or
// this one lost its lease); nothing was written.
var ErrConflict = errors.New("tree size is not the expected one")

// TreeHead is a project's verifiable-log tree as last integrated (spec
// tlog.md): the number of leaves, the RFC 6962 root hash of that size, and
// the latest checkpoint signed by the relay's log key over them (a C2SP
// signed note, without cosignatures). The zero TreeHead is the empty tree
// before the first integration (no checkpoint yet).
type TreeHead struct {
	Size       int64
	Root       [32]byte
	Checkpoint []byte
	UpdatedAt  time.Time // database clock, millisecond precision, UTC
}

// Tree is the verifiable log's storage (issue 24): per project, the tree
// head and the hash tiles of height 8 (C2SP tlog-tiles; a tlog.Tile with
// H = 8 and L ≥ 0), and the relay's one log key. Entry bundles are not
// stored (they are the records' bytes). A full tile (W = 256) never changes
// once stored; a partial tile is kept at the widest width integrated, and
// read at any width up to it (a tile's prefix never changes).
type Tree interface {
	// TreeHead returns the project's tree head, the zero TreeHead before
	// its first integration (any project id). Errors: ErrUnavailable.
	TreeHead(ctx context.Context, projectID string) (TreeHead, error)

	// ReadTiles returns, for each tile, exactly tiles[i].W*32 bytes: the
	// first W hashes of the stored tile (L, N). Errors: ErrNotFound when
	// any tile is absent or stored narrower than W (or is not a hash tile
	// of height 8); ErrUnavailable.
	ReadTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error)

	// IntegrateTree stores, in one transaction, the tiles (data[i] is
	// tiles[i].W*32 bytes) and the new head, provided the stored size is
	// still oldSize (0 before the first): otherwise ErrConflict and
	// nothing is written. head.Size must be ≥ oldSize (the tree never
	// shrinks) and ≥ 1, with a checkpoint; head.UpdatedAt is ignored (the database clock is used).
	// A stored tile wider than the given one is kept as it is. Errors:
	// ErrConflict, ErrUnavailable; a malformed argument is an error
	// wrapping neither.
	IntegrateTree(ctx context.Context, projectID string, oldSize int64, tiles []tlog.Tile, data [][]byte, head TreeHead) error

	// LogKey returns the relay's log key (a note signer key, secret),
	// calling create and storing its result first when the store holds
	// none. Concurrent first calls, in one process or several on one
	// database, all return the same stored key (one create wins; the
	// others' keys are discarded). The key is kept in the database, so
	// the database's backup carries it. Errors: create's, ErrUnavailable.
	LogKey(ctx context.Context, create func() (skey string, err error)) (skey string, err error)
}

// CheckTreeArgs checks IntegrateTree's arguments as both dialects must:
// hash tiles of height 8 with data of their width, and a head no smaller
// than oldSize. It returns nil or an error describing the first fault.
func CheckTreeArgs(oldSize int64, tiles []tlog.Tile, data [][]byte, head TreeHead) error {
	if oldSize < 0 || head.Size < oldSize || head.Size < 1 {
		return errTreeArgs("head size below the old size, or empty")
	}
	if len(head.Checkpoint) == 0 {
		return errTreeArgs("head without a checkpoint")
	}
	if len(tiles) != len(data) {
		return errTreeArgs("tiles and data differ in length")
	}
	for i, t := range tiles {
		if t.H != 8 || t.L < 0 || t.L > 63 || t.N < 0 || t.W < 1 || t.W > 256 || len(data[i]) != t.W*32 {
			return errTreeArgs("not a hash tile of height 8 with its data")
		}
	}
	return nil
}

type errTreeArgs string

func (e errTreeArgs) Error() string { return "integrate tree: " + string(e) }
