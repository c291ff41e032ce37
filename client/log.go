package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/wire"
)

// The verifiable log's reads (spec/tlog.md): checkpoints (C2SP
// tlog-checkpoint signed notes), hash tiles and entry bundles (C2SP
// tlog-tiles, height 8), checked with golang.org/x/mod/sumdb/tlog and
// sumdb/note.

// Errors of the log's reads.
var (
	// ErrCheckpointInvalid: a checkpoint that is not a C2SP checkpoint
	// signed by the log key, or whose origin is not the log's.
	ErrCheckpointInvalid = errors.New("checkpoint invalid")
	// ErrNotIncluded: a record (or entry) that the log's tree at a
	// checkpoint does not hold at its index.
	ErrNotIncluded = errors.New("record not included in the log")
	// ErrEntryInvalid: an entry of a bundle that is not the immutable
	// {event, receipt} JSON of the record with received_seq index+1.
	ErrEntryInvalid = errors.New("log entry is not the record it should be")
	// ErrCheckpointBehind: no checkpoint covering a record arrived in time.
	ErrCheckpointBehind = errors.New("no checkpoint covers the record yet")
)

// logTileHeight is the tile height of C2SP tlog-tiles: 256 hashes a tile.
const logTileHeight = acrtlog.TileHeight

// Checkpoint is a verified checkpoint: the origin, tree size and root of
// its note text, and the signed note exactly as served (with every
// signature: the log's and any cosignatures).
type Checkpoint struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	Note   []byte
}

// Tree is the checkpoint's tree head in x/mod's form.
func (c *Checkpoint) Tree() tlog.Tree { return tlog.Tree{N: c.Size, Hash: c.Root} }

// ParseCheckpoint opens msg, a C2SP tlog-checkpoint signed note, with the
// log's verifier v (signatures of other keys, such as witnesses'
// cosignatures, are kept but not checked) and parses its text with
// tlog.ParseCheckpoint: origin, decimal size without leading zeros,
// standard-base64 32-byte root (the relay writes no extension lines).
// Error: ErrCheckpointInvalid wrapping the reason (a note.Open error when
// the log's signature is missing or wrong, or tlog.ErrBadCheckpoint).
func ParseCheckpoint(msg []byte, v note.Verifier) (*Checkpoint, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpointInvalid, err)
	}
	c, err := acrtlog.ParseCheckpoint(n.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCheckpointInvalid, err)
	}
	cp := &Checkpoint{Origin: c.Origin, Size: c.Size, Root: c.Root, Note: bytes.Clone(msg)}
	return cp, nil
}

// SplitView is the evidence that a log showed two histories: two
// checkpoints of one origin, both signed by the log key, that cannot
// both hold: one size with two roots, a size smaller than one published
// before, or no consistency between them in the log's own tiles. Its
// JSON form {"reason","origin","checkpoint_a","checkpoint_b"} carries
// both signed notes as served, for anyone to check with the log's key.
type SplitView struct {
	Reason string
	A, B   *Checkpoint
}

func (s *SplitView) Error() string {
	return fmt.Sprintf("split view of log %s: %s (size %d root %s; size %d root %s)",
		s.A.Origin, s.Reason, s.A.Size, s.A.Root, s.B.Size, s.B.Root)
}

// MarshalJSON writes the evidence with both notes as text.
func (s *SplitView) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Reason string `json:"reason"`
		Origin string `json:"origin"`
		A      string `json:"checkpoint_a"`
		B      string `json:"checkpoint_b"`
	}{s.Reason, s.A.Origin, string(s.A.Note), string(s.B.Note)})
}

// CompareCheckpoints compares two verified checkpoints of one log, as two
// readers who exchange what they saw: at one size the roots must be
// equal, else the answer is a *SplitView holding both notes. Checkpoints
// of different sizes are not comparable without the tree: Log.CheckConsistency
// does that. Error also when the origins differ (two logs, no evidence).
func CompareCheckpoints(a, b *Checkpoint) error {
	if a.Origin != b.Origin {
		return fmt.Errorf("%w: origins %q and %q differ", ErrCheckpointInvalid, a.Origin, b.Origin)
	}
	if a.Size == b.Size && a.Root != b.Root {
		return &SplitView{Reason: "two roots for one tree size", A: a, B: b}
	}
	return nil
}

// Log reads one project's verifiable log under its C2SP tlog-tiles
// prefix: /v1/log/{project_id}/ with the Client's token (none for a public
// project), or /v1/feeds/{capability}/log/. It caches tiles (never a
// level-0 full tile beyond the last one read, so streaming a large log
// stays small). Safe for concurrent use.
type Log struct {
	Client    *Client
	Prefix    *url.URL // absolute, ending in "/"
	ProjectID string
	Verifier  note.Verifier
	// Origin, when set, is the only checkpoint origin accepted; when
	// empty, any origin ending in "/"+ProjectID (spec/tlog.md
	// §Checkpoints: "<public-url host and path>/<project_id>").
	Origin string

	mu    sync.Mutex
	tiles map[tlog.Tile][]byte
	last0 struct {
		t tlog.Tile
		d []byte
	}
}

// Log returns the reader of projectID's log, whose checkpoints must be
// signed by v (the relay's log key, `name+hash+key` via note.NewVerifier).
func (c *Client) Log(projectID string, v note.Verifier) *Log {
	return &Log{Client: c, Prefix: c.endpoint("/v1/log/"+url.PathEscape(projectID)+"/", nil), ProjectID: projectID, Verifier: v}
}

// FeedLog returns the reader of a project's log through a feed
// capability (the path segment of /v1/feeds/{capability}.atom).
func (c *Client) FeedLog(capability, projectID string, v note.Verifier) *Log {
	return &Log{Client: c, Prefix: c.endpoint("/v1/feeds/"+url.PathEscape(capability)+"/log/", nil), ProjectID: projectID, Verifier: v}
}

// LogKey reads the relay's log verifier key (`name+hash+key`) from
// GET /v1/log-key. Trusting it is trusting the relay at that moment:
// an auditor should pin it (acrelay audit keeps it in its state).
func (c *Client) LogKey(ctx context.Context) (string, error) {
	resp, err := c.doAccept(ctx, http.MethodGet, c.endpoint("/v1/log-key", nil), "text/plain", "", nil, true)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(resp.body))
	if _, err := note.NewVerifier(key); err != nil {
		return "", fmt.Errorf("%w: log key: %w", ErrMalformedRecord, err)
	}
	return key, nil
}

func (l *Log) get(ctx context.Context, rel string) ([]byte, error) {
	u := *l.Prefix
	u.Path += rel
	u.RawPath = ""
	resp, err := l.Client.doAccept(ctx, http.MethodGet, &u, "application/octet-stream, text/plain;q=0.9", "", nil, true)
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

// Checkpoint fetches the log's checkpoint and verifies it
// (ParseCheckpoint) and its origin. Errors: *APIError (404 log_empty
// before the first record is integrated), ErrCheckpointInvalid.
func (l *Log) Checkpoint(ctx context.Context) (*Checkpoint, error) {
	body, err := l.get(ctx, "checkpoint")
	if err != nil {
		return nil, err
	}
	cp, err := ParseCheckpoint(body, l.Verifier)
	if err != nil {
		return nil, err
	}
	if l.Origin != "" && cp.Origin != l.Origin {
		return nil, fmt.Errorf("%w: origin %q, want %q", ErrCheckpointInvalid, cp.Origin, l.Origin)
	}
	if l.Origin == "" && !strings.HasSuffix(cp.Origin, "/"+l.ProjectID) {
		return nil, fmt.Errorf("%w: origin %q is not project %s's", ErrCheckpointInvalid, cp.Origin, l.ProjectID)
	}
	return cp, nil
}

// fetchTile reads one tile (hash tile or, with L = -1, entry bundle). A
// partial tile the relay no longer has (404) is cut from the full one,
// as C2SP tlog-tiles allows.
func (l *Log) fetchTile(ctx context.Context, t tlog.Tile) ([]byte, error) {
	full := t.W == 1<<t.H
	l.mu.Lock()
	if d, ok := l.tiles[t]; ok {
		l.mu.Unlock()
		return d, nil
	}
	if l.last0.t == t && l.last0.d != nil {
		d := l.last0.d
		l.mu.Unlock()
		return d, nil
	}
	l.mu.Unlock()
	d, err := l.get(ctx, acrtlog.TilePath(t))
	var ae *APIError
	if err != nil && !full && errors.As(err, &ae) && ae.Status == http.StatusNotFound {
		ft := t
		ft.W = 1 << t.H
		fd, ferr := l.get(ctx, acrtlog.TilePath(ft))
		if ferr != nil {
			return nil, err
		}
		if t.L >= 0 {
			if len(fd) < t.W*tlog.HashSize {
				return nil, fmt.Errorf("%w: tile %s is %d bytes", ErrMalformedRecord, acrtlog.TilePath(ft), len(fd))
			}
			d, err = fd[:t.W*tlog.HashSize], nil
		} else {
			d, err = fd, nil // the caller keeps the first W entries
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", acrtlog.TilePath(t), err)
	}
	if t.L >= 0 {
		l.mu.Lock()
		if t.L == 0 && full {
			l.last0.t, l.last0.d = t, d
		} else {
			if l.tiles == nil {
				l.tiles = map[tlog.Tile][]byte{}
			}
			l.tiles[t] = d
		}
		l.mu.Unlock()
	}
	return d, nil
}

// tileReader adapts the Log to tlog.TileReader for one call's context.
type tileReader struct {
	ctx context.Context
	l   *Log
}

func (r tileReader) Height() int { return logTileHeight }

func (r tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		d, err := r.l.fetchTile(r.ctx, t)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (r tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// HashReader returns a tlog.HashReader over the log's tiles that
// authenticates every tile against cp (tlog.TileHashReader): a hash it
// returns is the tree's at cp, or it fails.
func (l *Log) HashReader(ctx context.Context, cp *Checkpoint) tlog.HashReader {
	return tlog.TileHashReader(cp.Tree(), tileReader{ctx: ctx, l: l})
}

// RecordLeaf returns the leaf bytes of a record (spec/tlog.md "The
// tree"): its immutable {event, receipt} JSON, rebuilt from the event
// bytes as served and the receipt (the same bytes as the relay's
// store.Record.ImmutableJSON).
func RecordLeaf(r Record) []byte {
	b := make([]byte, 0, len(r.Raw)+96)
	b = append(b, `{"event":`...)
	b = append(b, r.Raw...)
	b = append(b, `,"receipt":{"received_at":"`...)
	b = append(b, r.Receipt.ReceivedAt...)
	b = append(b, `","received_seq":"`...)
	b = strconv.AppendInt(b, r.Receipt.ReceivedSeq, 10)
	b = append(b, `"}}`...)
	return b
}

// CheckInclusion verifies that leaf is leaf leafIndex of the tree at cp,
// with an inclusion proof computed from the log's authenticated tiles
// (tlog.ProveRecord, then tlog.CheckRecord). Errors: ErrNotIncluded
// (beyond cp, or a different leaf), or the error of reading the tiles.
func (l *Log) CheckInclusion(ctx context.Context, cp *Checkpoint, leafIndex int64, leaf []byte) error {
	if leafIndex < 0 || leafIndex >= cp.Size {
		return fmt.Errorf("%w: leaf %d is beyond tree size %d", ErrNotIncluded, leafIndex, cp.Size)
	}
	proof, err := tlog.ProveRecord(cp.Size, leafIndex, l.HashReader(ctx, cp))
	if err != nil {
		return fmt.Errorf("inclusion proof of leaf %d in tree %d: %w", leafIndex, cp.Size, err)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, leafIndex, tlog.RecordHash(leaf)); err != nil {
		return fmt.Errorf("%w: leaf %d in tree %d: %w", ErrNotIncluded, leafIndex, cp.Size, err)
	}
	return nil
}

// CheckRecord verifies that the record r (as read from the relay) is
// leaf received_seq−1 of the tree at cp: CheckInclusion of RecordLeaf(r).
func (l *Log) CheckRecord(ctx context.Context, cp *Checkpoint, r Record) error {
	if err := l.CheckInclusion(ctx, cp, r.Receipt.ReceivedSeq-1, RecordLeaf(r)); err != nil {
		return fmt.Errorf("record received_seq %d: %w", r.Receipt.ReceivedSeq, err)
	}
	return nil
}

// CheckConsistency verifies that the tree at newer extends the tree at
// older (spec/tlog.md §Auditing), with a consistency proof computed
// from the log's tiles authenticated against newer (tlog.ProveTree,
// then tlog.CheckTree). A contradiction is a *SplitView holding both
// notes: a smaller size, two roots at one size, or a failed proof.
// Other errors: reading the tiles, or origins that differ.
func (l *Log) CheckConsistency(ctx context.Context, older, newer *Checkpoint) error {
	if err := CompareCheckpoints(older, newer); err != nil {
		return err
	}
	switch {
	case newer.Size < older.Size:
		return &SplitView{Reason: "tree size went back", A: older, B: newer}
	case newer.Size == older.Size || older.Size == 0:
		return nil
	}
	proof, err := tlog.ProveTree(newer.Size, older.Size, l.HashReader(ctx, newer))
	if err != nil {
		return fmt.Errorf("consistency proof %d→%d: %w", older.Size, newer.Size, err)
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Root, older.Size, older.Root); err != nil {
		return &SplitView{Reason: "the newer tree does not extend the older: " + err.Error(), A: older, B: newer}
	}
	return nil
}

// Entry is one log entry: its leaf index (received_seq − 1) and bytes.
type Entry struct {
	Index int64
	Data  []byte
}

// Entries yields the entries with indexes in [start, end) of the tree at
// cp, streaming entry bundles one at a time, every entry of each bundle
// read (those outside [start, end) too) checked against the level-0 tile
// authenticated against cp (its RecordHash must be the tree's leaf hash). It stops after yielding (Entry{}, err): ErrNotIncluded
// for an entry the tree does not hold, a malformed bundle, a read error.
func (l *Log) Entries(ctx context.Context, cp *Checkpoint, start, end int64) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if start < 0 || end > cp.Size || start > end {
			yield(Entry{}, fmt.Errorf("entries [%d, %d) outside tree size %d", start, end, cp.Size))
			return
		}
		hr := l.HashReader(ctx, cp)
		for n := start >> logTileHeight; n<<logTileHeight < end; n++ {
			first := n << logTileHeight
			w := min(int64(1)<<logTileHeight, cp.Size-first)
			t := tlog.Tile{H: logTileHeight, L: -1, N: n, W: int(w)}
			data, err := l.fetchTile(ctx, t)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			entries, err := acrtlog.DecodeBundle(data)
			if err != nil {
				yield(Entry{}, fmt.Errorf("%w: %w", ErrMalformedRecord, err))
				return
			}
			idx := make([]int64, w)
			for i := range idx {
				idx[i] = tlog.StoredHashIndex(0, first+int64(i))
			}
			hashes, err := hr.ReadHashes(idx)
			if err != nil {
				yield(Entry{}, fmt.Errorf("level-0 hashes of bundle %d: %w", n, err))
				return
			}
			// The entries present are checked first, so that a changed
			// entry is named even when the bundle is also short.
			for i, e := range entries[:min(int64(len(entries)), w)] {
				x := first + int64(i)
				if tlog.RecordHash(e) != hashes[i] {
					yield(Entry{}, fmt.Errorf("%w: entry %d (received_seq %d) of bundle %s does not hash to the tree's leaf", ErrNotIncluded, x, x+1, acrtlog.TilePath(t)))
					return
				}
				if x < start || x >= end {
					continue
				}
				if !yield(Entry{Index: x, Data: e}, nil) {
					return
				}
			}
			if int64(len(entries)) < w {
				yield(Entry{}, fmt.Errorf("%w: entry bundle %s holds %d entries, want %d", ErrMalformedRecord, acrtlog.TilePath(t), len(entries), w))
				return
			}
		}
	}
}

// CheckEntry verifies that e is a record's immutable JSON as the relay
// writes it ({"event":…,"receipt":{"received_at":…,"received_seq":…}},
// byte for byte) with received_seq e.Index+1, and returns the record.
// When the Client has a Keyring the event's signature is verified too.
// Errors: ErrEntryInvalid, or the Keyring's.
func (l *Log) CheckEntry(e Entry) (Record, error) {
	var w struct {
		Event   json.RawMessage `json:"event"`
		Receipt wire.Receipt    `json:"receipt"`
	}
	if err := json.Unmarshal(e.Data, &w); err != nil {
		return Record{}, fmt.Errorf("%w: entry %d: %w", ErrEntryInvalid, e.Index, err)
	}
	seq, err := parseSeq(w.Receipt.ReceivedSeq)
	if err != nil {
		return Record{}, fmt.Errorf("%w: entry %d: %w", ErrEntryInvalid, e.Index, err)
	}
	if seq != e.Index+1 {
		return Record{}, fmt.Errorf("%w: entry %d holds received_seq %d, want %d", ErrEntryInvalid, e.Index, seq, e.Index+1)
	}
	r := Record{Raw: w.Event, Receipt: Receipt{ReceivedSeq: seq, ReceivedAt: w.Receipt.ReceivedAt}}
	if !bytes.Equal(RecordLeaf(r), e.Data) {
		return Record{}, fmt.Errorf("%w: entry %d is not in the relay's canonical record form", ErrEntryInvalid, e.Index)
	}
	if l.Client.Keys != nil {
		ev, err := DecodeEvent(w.Event)
		if err != nil {
			return Record{}, fmt.Errorf("%w: entry %d: %w", ErrEntryInvalid, e.Index, err)
		}
		if err := l.Client.Keys.Verify(ev); err != nil {
			return Record{}, fmt.Errorf("entry %d: %w", e.Index, err)
		}
		r.Event, r.Verified = ev, true
	}
	return r, nil
}

// InclusionProof reads the relay's JSON inclusion proof of the record
// with receivedSeq in the tree of size treeSize and checks it against cp
// (whose size must be treeSize) and leaf with tlog.CheckRecord: for
// clients that do not read tiles. Errors: *APIError, ErrMalformedRecord,
// ErrNotIncluded.
func (l *Log) InclusionProof(ctx context.Context, cp *Checkpoint, receivedSeq int64, leaf []byte) (*wire.InclusionProof, error) {
	var p wire.InclusionProof
	q := url.Values{"received_seq": {strconv.FormatInt(receivedSeq, 10)}, "tree_size": {strconv.FormatInt(cp.Size, 10)}}
	if err := l.getProof(ctx, "proof/inclusion", q, &p); err != nil {
		return nil, err
	}
	if p.LeafIndex != receivedSeq-1 || p.TreeSize != cp.Size {
		return nil, fmt.Errorf("%w: inclusion proof for leaf %d in %d, asked %d in %d", ErrMalformedRecord, p.LeafIndex, p.TreeSize, receivedSeq-1, cp.Size)
	}
	proof, err := hashesOf(p.Hashes)
	if err != nil {
		return nil, err
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, receivedSeq-1, tlog.RecordHash(leaf)); err != nil {
		return nil, fmt.Errorf("%w: received_seq %d in tree %d: %w", ErrNotIncluded, receivedSeq, cp.Size, err)
	}
	return &p, nil
}

// ConsistencyProof reads the relay's JSON consistency proof between the
// trees of older and newer and checks it with tlog.CheckTree; a proof
// that fails is a *SplitView. Errors otherwise as InclusionProof.
func (l *Log) ConsistencyProof(ctx context.Context, older, newer *Checkpoint) (*wire.ConsistencyProof, error) {
	if err := CompareCheckpoints(older, newer); err != nil {
		return nil, err
	}
	if newer.Size < older.Size {
		return nil, &SplitView{Reason: "tree size went back", A: older, B: newer}
	}
	var p wire.ConsistencyProof
	q := url.Values{"old_size": {strconv.FormatInt(older.Size, 10)}, "tree_size": {strconv.FormatInt(newer.Size, 10)}}
	if err := l.getProof(ctx, "proof/consistency", q, &p); err != nil {
		return nil, err
	}
	if p.OldSize != older.Size || p.TreeSize != newer.Size {
		return nil, fmt.Errorf("%w: consistency proof %d→%d, asked %d→%d", ErrMalformedRecord, p.OldSize, p.TreeSize, older.Size, newer.Size)
	}
	if older.Size == 0 || older.Size == newer.Size {
		return &p, nil
	}
	proof, err := hashesOf(p.Hashes)
	if err != nil {
		return nil, err
	}
	if err := tlog.CheckTree(proof, newer.Size, newer.Root, older.Size, older.Root); err != nil {
		return nil, &SplitView{Reason: "the newer tree does not extend the older: " + err.Error(), A: older, B: newer}
	}
	return &p, nil
}

func (l *Log) getProof(ctx context.Context, rel string, q url.Values, out any) error {
	u := *l.Prefix
	u.Path += rel
	u.RawPath = ""
	u.RawQuery = q.Encode()
	resp, err := l.Client.doAccept(ctx, http.MethodGet, &u, "application/json", "", nil, true)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformedRecord, err)
	}
	return nil
}

func hashesOf(hs [][]byte) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(hs))
	for i, h := range hs {
		if len(h) != tlog.HashSize {
			return nil, fmt.Errorf("%w: proof hash of %d bytes", ErrMalformedRecord, len(h))
		}
		copy(out[i][:], h)
	}
	return out, nil
}
