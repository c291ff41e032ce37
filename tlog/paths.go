package tlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// TileHeight is the height of every tile: 8, so a full tile holds 256
// hashes (C2SP tlog-tiles).
const TileHeight = 8

// EntriesLevel is the level given to an entry bundle in a tlog.Tile (x/mod
// calls it the "data" tile): tile/entries/<N>[.p/<W>].
const EntriesLevel = -1

// maxLevel is the highest hash-tile level a path may name: 63 levels of
// height 8 cover any int64 tree size many times over, and C2SP bounds L by 63.
const maxLevel = 63

// ErrBadTilePath: a path that is not a canonical C2SP tile path
// (ParseTilePath).
var ErrBadTilePath = errors.New("not a tile path")

// ErrEntryTooLarge: an entry longer than 65535 bytes cannot be written in a
// C2SP entry bundle, whose lengths are big-endian uint16 (EncodeBundle).
var ErrEntryTooLarge = errors.New("entry exceeds 65535 bytes")

// ErrBadBundle: bytes that are not a C2SP entry bundle (DecodeBundle).
var ErrBadBundle = errors.New("not an entry bundle")

// TilePath returns the C2SP tlog-tiles path of t, relative to the log's
// prefix: "tile/<L>/<N>[.p/<W>]" for a hash tile (t.L ≥ 0) or
// "tile/entries/<N>[.p/<W>]" for an entry bundle (t.L == EntriesLevel).
// N is written in 3-digit groups, all but the last prefixed with "x"
// (1234067 → "x001/x234/067"); ".p/<W>" is present only when
// 0 < t.W < 256. Unlike tlog.Tile.Path, the height is not in the path (it is
// always TileHeight). TilePath does not validate t; ParseTilePath does.
func TilePath(t tlog.Tile) string {
	var b strings.Builder
	b.WriteString("tile/")
	if t.L == EntriesLevel {
		b.WriteString("entries")
	} else {
		b.WriteString(strconv.Itoa(t.L))
	}
	b.WriteByte('/')
	b.WriteString(tileIndex(t.N))
	if t.W > 0 && t.W < 1<<TileHeight {
		b.WriteString(".p/")
		b.WriteString(strconv.Itoa(t.W))
	}
	return b.String()
}

// tileIndex writes n ≥ 0 as C2SP's groups of three digits.
func tileIndex(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// ParseTilePath parses a path TilePath writes and returns the tile with
// H = TileHeight, W = 256 for a full tile, and L = EntriesLevel for an entry
// bundle. Only the canonical spelling is accepted (no leading zeros in L or
// W, no superfluous "x000" groups, 0 ≤ L ≤ 63, 1 ≤ W ≤ 255 after ".p/"),
// so each tile has exactly one path. Anything else is ErrBadTilePath.
func ParseTilePath(p string) (tlog.Tile, error) {
	bad := func() (tlog.Tile, error) { return tlog.Tile{}, fmt.Errorf("%w: %q", ErrBadTilePath, p) }
	rest, ok := strings.CutPrefix(p, "tile/")
	if !ok {
		return bad()
	}
	level, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return bad()
	}
	t := tlog.Tile{H: TileHeight, W: 1 << TileHeight}
	if level == "entries" {
		t.L = EntriesLevel
	} else {
		l, ok := decimal(level, maxLevel)
		if !ok {
			return bad()
		}
		t.L = int(l)
	}
	index, width, partial := strings.Cut(rest, ".p/")
	if partial {
		w, ok := decimal(width, 1<<TileHeight-1)
		if !ok || w == 0 {
			return bad()
		}
		t.W = int(w)
	}
	groups := strings.Split(index, "/")
	for i, g := range groups {
		if i < len(groups)-1 {
			g, ok = strings.CutPrefix(g, "x")
			if !ok {
				return bad()
			}
		}
		if len(g) != 3 || g[0] < '0' || g[0] > '9' || g[1] < '0' || g[1] > '9' || g[2] < '0' || g[2] > '9' {
			return bad()
		}
		d := int64(g[0]-'0')*100 + int64(g[1]-'0')*10 + int64(g[2]-'0')
		if t.N > (1<<63-1-d)/1000 {
			return bad()
		}
		t.N = t.N*1000 + d
	}
	if TilePath(t) != p {
		return bad() // a leading "x000/" group, or "x" on the last group
	}
	return t, nil
}

// decimal parses s as a canonical decimal in [0, max].
func decimal(s string, max int64) (int64, bool) {
	if s == "" || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	var n int64
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (max-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// EncodeBundle returns the C2SP entry bundle of entries: each entry as a
// big-endian uint16 length followed by its bytes. An entry longer than
// 65535 bytes cannot be written: ErrEntryTooLarge (an event may be 65536
// bytes before its receipt is added, so a record can exceed it; such a
// bundle is not served, the record still has its leaf and proofs).
func EncodeBundle(entries [][]byte) ([]byte, error) {
	n := 0
	for i, e := range entries {
		if len(e) > 0xffff {
			return nil, fmt.Errorf("entry %d: %w", i, ErrEntryTooLarge)
		}
		n += 2 + len(e)
	}
	b := make([]byte, 0, n)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	return b, nil
}

// DecodeBundle splits a C2SP entry bundle into its entries (sub-slices of
// b). At most 256 entries, each complete: otherwise ErrBadBundle. An empty
// b is a bundle of no entries.
func DecodeBundle(b []byte) ([][]byte, error) {
	var entries [][]byte
	for off := 0; off < len(b); {
		if len(entries) == 1<<TileHeight {
			return nil, fmt.Errorf("%w: more than %d entries", ErrBadBundle, 1<<TileHeight)
		}
		if len(b)-off < 2 {
			return nil, fmt.Errorf("%w: truncated length at byte %d", ErrBadBundle, off)
		}
		n := int(binary.BigEndian.Uint16(b[off:]))
		off += 2
		if len(b)-off < n {
			return nil, fmt.Errorf("%w: entry %d truncated", ErrBadBundle, len(entries))
		}
		entries = append(entries, b[off:off+n:off+n])
		off += n
	}
	return entries, nil
}
