package tlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

func TestTilePathExact(t *testing.T) {
	cases := []struct {
		tile tlog.Tile
		path string
	}{
		// C2SP tlog-tiles: "index 1234067 will be encoded as x001/x234/067".
		{tlog.Tile{H: 8, L: 0, N: 1234067, W: 256}, "tile/0/x001/x234/067"},
		{tlog.Tile{H: 8, L: 0, N: 1234067, W: 7}, "tile/0/x001/x234/067.p/7"},
		{tlog.Tile{H: 8, L: 0, N: 0, W: 256}, "tile/0/000"},
		{tlog.Tile{H: 8, L: 0, N: 0, W: 1}, "tile/0/000.p/1"},
		{tlog.Tile{H: 8, L: 1, N: 999, W: 255}, "tile/1/999.p/255"},
		{tlog.Tile{H: 8, L: 2, N: 1000, W: 256}, "tile/2/x001/000"},
		{tlog.Tile{H: 8, L: 63, N: 1000000, W: 256}, "tile/63/x001/x000/000"},
		{tlog.Tile{H: 8, L: EntriesLevel, N: 1234067, W: 256}, "tile/entries/x001/x234/067"},
		{tlog.Tile{H: 8, L: EntriesLevel, N: 5, W: 200}, "tile/entries/005.p/200"},
		{tlog.Tile{H: 8, L: 0, N: 1<<63 - 1, W: 256}, "tile/0/x009/x223/x372/x036/x854/x775/807"},
	}
	for _, c := range cases {
		if got := TilePath(c.tile); got != c.path {
			t.Errorf("TilePath(%+v) = %q, want %q", c.tile, got, c.path)
		}
		got, err := ParseTilePath(c.path)
		if err != nil || got != c.tile {
			t.Errorf("ParseTilePath(%q) = %+v, %v; want %+v", c.path, got, err, c.tile)
		}
	}
}

func TestParseTilePathRefuses(t *testing.T) {
	for _, p := range []string{
		"", "tile/", "tile/0", "tile/0/", "tile/0/1", "tile/0/01", "tile/0/0001",
		"tile/00/000", "tile/64/000", "tile/-1/000", "tile/data/000", "tile/8/0/000",
		"tile/0/x000/001", "tile/0/x001/x234", "tile/0/001/234", "tile/0/x1/234",
		"tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/07", "tile/0/000.p/", "tile/0/000.p/1/",
		"tile/0/000/", "/tile/0/000", "tile/0/x009/x223/x372/x036/x854/x775/808",
		"tile/0/x999/x999/x999/x999/x999/x999/x999/999", "tile/entries/000.p/1x", "tile/0/0a0",
	} {
		if tile, err := ParseTilePath(p); !errors.Is(err, ErrBadTilePath) {
			t.Errorf("ParseTilePath(%q) = %+v, %v; want ErrBadTilePath", p, tile, err)
		}
	}
}

func TestBundleRoundTrip(t *testing.T) {
	entries := [][]byte{[]byte(`{"a":1}`), {}, bytes.Repeat([]byte{'x'}, 0xffff), []byte("z")}
	b, err := EncodeBundle(entries)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 + 7 + 2 + 0 + 2 + 0xffff + 2 + 1; len(b) != want {
		t.Fatalf("len = %d, want %d", len(b), want)
	}
	if !bytes.Equal(b[:11], []byte("\x00\x07{\"a\":1}\x00\x00")) || !bytes.Equal(b[11:13], []byte{0xff, 0xff}) || !bytes.Equal(b[len(b)-3:], []byte("\x00\x01z")) {
		t.Fatalf("bytes % x … % x", b[:13], b[len(b)-3:])
	}
	got, err := DecodeBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
	for i := range entries {
		if !bytes.Equal(got[i], entries[i]) {
			t.Errorf("entry %d differs", i)
		}
	}
	if _, err := EncodeBundle([][]byte{make([]byte, 0x10000)}); !errors.Is(err, ErrEntryTooLarge) {
		t.Errorf("65536-byte entry: %v, want ErrEntryTooLarge", err)
	}
	for _, bad := range [][]byte{{0}, {0, 2, 'a'}, append(bytes.Repeat([]byte{0, 0}, 257), 0, 0)} {
		if _, err := DecodeBundle(bad); !errors.Is(err, ErrBadBundle) {
			t.Errorf("DecodeBundle(% x…) = %v, want ErrBadBundle", bad[:min(len(bad), 4)], err)
		}
	}
	if got, err := DecodeBundle(bytes.Repeat([]byte{0, 0}, 256)); err != nil || len(got) != 256 {
		t.Errorf("256 empty entries: %d, %v", len(got), err)
	}
}

func FuzzParseTilePath(f *testing.F) {
	for _, s := range []string{"tile/0/x001/x234/067", "tile/entries/000.p/9", "tile/1/x000/000", "tile/63/999.p/255"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		tile, err := ParseTilePath(p)
		if err != nil {
			if !errors.Is(err, ErrBadTilePath) {
				t.Fatalf("error %v is not ErrBadTilePath", err)
			}
			return
		}
		if TilePath(tile) != p {
			t.Fatalf("%q parsed as %+v, written %q", p, tile, TilePath(tile))
		}
		if tile.H != TileHeight || tile.L < EntriesLevel || tile.L > 63 || tile.N < 0 || tile.W < 1 || tile.W > 256 || !strings.HasPrefix(p, "tile/") {
			t.Fatalf("%q parsed as out-of-range %+v", p, tile)
		}
	})
}

func FuzzDecodeBundle(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01a\x00\x00"))
	f.Add([]byte("\x00\x05ab"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := DecodeBundle(b)
		if err != nil {
			if !errors.Is(err, ErrBadBundle) {
				t.Fatalf("error %v is not ErrBadBundle", err)
			}
			return
		}
		again, err := EncodeBundle(entries)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x, %v; want % x", again, err, b)
		}
	})
}
