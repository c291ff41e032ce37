package relay

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/gorilla/mux"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/wire"
)

// The verifiable log's reads (spec/tlog.md "Reading"): per project, under
// /v1/log/{project_id}/ (a read token of the project, or none for a
// public project) and /v1/feeds/{feed_token}/log/ (a feed capability):
//
//	checkpoint                      C2SP tlog-checkpoint (text/plain)
//	tile/<L>/<N>[.p/<W>]            C2SP tlog-tiles hash tile (store.Tree.ReadTiles)
//	tile/entries/<N>[.p/<W>]        entry bundle: the records' immutable JSON
//	proof/inclusion?received_seq=S[&tree_size=N]     wire.InclusionProof
//	proof/consistency?old_size=M[&tree_size=N]       wire.ConsistencyProof
//
// and GET /v1/log-key, the log's verifier key. Everything is served from
// the tree head the sequencer last stored: nothing beyond its size.

// Link relations of the log.
const (
	relLogCheckpoint     = "https://agenttool.dev/rels/log-checkpoint"
	relLogInclusionProof = "https://agenttool.dev/rels/log-inclusion-proof"
	relLogKey            = "https://agenttool.dev/rels/log-key"
)

// logKeyPath serves the log's verifier key (Config.LogVerifierKey).
const logKeyPath = "/v1/log-key"

const (
	mediaOctetStream = "application/octet-stream"
	mediaTextPlain   = "text/plain; charset=utf-8"
)

// Cache lifetimes of the log's resources (spec/tlog.md "Reading"): tiles
// and bundles, full or partial, and proofs at a named tree size never
// change; the checkpoint is short-lived. C2SP tlog-tiles: "This endpoint
// is immutable, so its caching headers SHOULD be long-lived" — a partial
// tile's path names its width, and its W hashes are fixed once the tree
// holds them (a reader asks for the wider path when the tree grows).
const (
	cacheLogImmutable = "max-age=31536000, immutable"
	cacheLogHead      = "max-age=1"
)

var (
	errLogPathInvalid    = apierror.New(wire.CodeLogPathInvalid)
	errLogBeyondTree     = apierror.New(wire.CodeLogBeyondTree)
	errLogEmpty          = apierror.New(wire.CodeLogEmpty)
	errReceivedSeqBad    = apierror.New(wire.CodeReceivedSeqInvalid)
	errTreeSizeBad       = apierror.New(wire.CodeTreeSizeInvalid)
	errLogUnavailable    = apierror.New(wire.CodeLogUnavailable)
	errLogEntryTooLarge  = apierror.New(wire.CodeLogEntryTooLarge)
	errLogEntriesFeedCap = apierror.New(wire.CodeLogEntriesNeedToken)
	errLogKeyUnset       = apierror.New(wire.CodeNotFound).Say("this relay has no log key")
)

// logRead is one request's log: the project, its visibility (for
// Cache-Control) and whether it came through a feed capability.
type logRead struct {
	projectID  string
	public     bool
	capability bool
}

// handleLog: GET|HEAD /v1/log/{project_id}/{rest} with a read token of the
// project (another project's: 404), or none for a public project (else
// 401, as readProject).
func (s *Server) handleLog(w http.ResponseWriter, r *http.Request) {
	pid := mux.Vars(r)["project_id"]
	p := principalFrom(r.Context())
	if !p.Anonymous {
		if err := requireProject(p, store.ScopeRead); err != nil {
			s.writeError(w, r, err)
			return
		}
		if pid != p.ProjectID {
			s.writeError(w, r, errNotFound)
			return
		}
	} else if !correspondence.ValidUUID(pid) {
		s.writeError(w, r, errUnauthorized)
		return
	}
	v, err := s.st.ProjectVisibility(r.Context(), pid)
	if p.Anonymous && (isNotFound(err) || (err == nil && v != store.VisibilityPublic)) {
		s.writeError(w, r, errUnauthorized)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Vary", "Authorization")
	s.serveLog(w, r, logRead{projectID: pid, public: v == store.VisibilityPublic}, mux.Vars(r)["rest"])
}

// handleFeedLog: GET|HEAD /v1/feeds/{feed_token}/log/{rest}: the log of
// the capability's project (404 for a refused capability, as
// handleFeedGet), except entry bundles (403: they hold every repository).
func (s *Server) handleFeedLog(w http.ResponseWriter, r *http.Request) {
	ft, err := s.feedToken(r, mux.Vars(r)["feed_token"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.st.ProjectVisibility(r.Context(), ft.ProjectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.serveLog(w, r, logRead{projectID: ft.ProjectID, public: v == store.VisibilityPublic, capability: true}, mux.Vars(r)["rest"])
}

// handleLogKey: GET|HEAD /v1/log-key → the log's verifier key
// (name+hash+key, golang.org/x/mod/sumdb/note) and a newline.
func (s *Server) handleLogKey(w http.ResponseWriter, r *http.Request) {
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.cfg.LogVerifierKey == "" {
		s.writeError(w, r, errLogKeyUnset)
		return
	}
	w.Header().Set("Cache-Control", "public, max-age=3600")
	s.writeRepresentation(w, r, mediaTextPlain, []byte(s.cfg.LogVerifierKey+"\n"))
}

func (lr logRead) cacheControl(lifetime string) string {
	if lr.public {
		return "public, " + lifetime
	}
	return "private, " + lifetime
}

func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, lr logRead, rest string) {
	ctx := r.Context()
	var params []string
	switch rest {
	case "proof/inclusion":
		params = []string{"received_seq", "tree_size"}
	case "proof/consistency":
		params = []string{"old_size", "tree_size"}
	}
	q, err := readQuery(r, params...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var tile tlog.Tile
	if rest != "checkpoint" && params == nil {
		if tile, err = acrtlog.ParseTilePath(rest); err != nil {
			s.writeError(w, r, errLogPathInvalid)
			return
		}
		if tile.L == acrtlog.EntriesLevel && lr.capability {
			s.writeError(w, r, errLogEntriesFeedCap)
			return
		}
	}
	st := s.st
	head, err := st.TreeHead(ctx, lr.projectID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if head.Size == 0 {
		if rest == "checkpoint" && s.cfg.LogSigner != nil {
			s.serveEmptyCheckpoint(w, r, lr)
			return
		}
		s.writeError(w, r, errLogEmpty)
		return
	}
	switch {
	case rest == "checkpoint":
		s.serveCheckpoint(w, r, lr, head)
	case rest == "proof/inclusion":
		s.serveInclusionProof(w, r, lr, head, q)
	case rest == "proof/consistency":
		s.serveConsistencyProof(w, r, lr, head, q)
	case tile.L == acrtlog.EntriesLevel:
		s.serveBundle(w, r, lr, head, tile)
	default:
		s.serveTile(w, r, lr, head, tile)
	}
}

// serveCheckpoint: the latest checkpoint the sequencer signed, with the
// cosignatures the relay holds (Config.LogCosignatures).
func (s *Server) serveCheckpoint(w http.ResponseWriter, r *http.Request, lr logRead, head store.TreeHead) {
	body := head.Checkpoint
	if s.cfg.LogCosignatures != nil {
		cs, err := s.cfg.LogCosignatures(r.Context(), lr.projectID, head.Checkpoint)
		if err != nil {
			s.log.WarnContext(r.Context(), "log checkpoint: cosignatures not added", "project_id", lr.projectID, "err", err)
		} else {
			body = cs
		}
	}
	w.Header().Set("Cache-Control", lr.cacheControl(cacheLogHead))
	s.writeRepresentation(w, r, mediaTextPlain, body)
}

// serveEmptyCheckpoint: a project with nothing integrated yet answers
// the checkpoint of its empty tree, size 0 with the root SHA-256("")
// (RFC 6962 §2.1; C2SP tlog-witness: "A checkpoint of size zero MUST
// have the root hash of the empty tree"), signed with the log key when
// read (Ed25519 is deterministic: every process serves the same bytes),
// with the cosignatures held on it.
func (s *Server) serveEmptyCheckpoint(w http.ResponseWriter, r *http.Request, lr logRead) {
	msg, err := acrtlog.SignCheckpoint(s.cfg.LogSigner, acrtlog.Checkpoint{Origin: acrtlog.Origin(s.publicBase(r), lr.projectID), Size: 0, Root: acrtlog.EmptyRoot})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveCheckpoint(w, r, lr, store.TreeHead{Checkpoint: msg})
}

// tileWidth is how many hashes the tile (L, N) holds in a tree of size
// n: up to 256 (≤ 0 when the tile is beyond the tree).
func tileWidth(l int, n, size int64) int64 {
	return min(256, (size>>(acrtlog.TileHeight*l))-n*256)
}

func (s *Server) serveTile(w http.ResponseWriter, r *http.Request, lr logRead, head store.TreeHead, t tlog.Tile) {
	if int64(t.W) > tileWidth(t.L, t.N, head.Size) {
		s.writeError(w, r, errLogBeyondTree)
		return
	}
	data, err := s.readTiles(r.Context(), lr.projectID, []tlog.Tile{t})
	if err != nil {
		if isNotFound(err) { // a tile within the head must be stored
			s.log.ErrorContext(r.Context(), "log tile missing within the tree head", "project_id", lr.projectID, "tile", acrtlog.TilePath(t), "size", head.Size)
			err = errLogUnavailable
		}
		s.writeError(w, r, err)
		return
	}
	s.writeTileLike(w, r, lr, data[0])
}

// writeTileLike serves a tile or an entry bundle: immutable, full or
// partial (cacheLogImmutable).
func (s *Server) writeTileLike(w http.ResponseWriter, r *http.Request, lr logRead, body []byte) {
	w.Header().Set("Cache-Control", lr.cacheControl(cacheLogImmutable))
	s.writeRepresentation(w, r, mediaOctetStream, body)
}

// serveBundle builds the entry bundle from the records (store.Feed
// RecordsAfter, one page of the bundle's width): each entry is the
// record's ImmutableJSON, exactly the bytes the events routes serve. A
// record missing from the store leaves the bundle short (a client sees
// it), never filled with another.
func (s *Server) serveBundle(w http.ResponseWriter, r *http.Request, lr logRead, head store.TreeHead, t tlog.Tile) {
	first := t.N << acrtlog.TileHeight
	if first+int64(t.W) > head.Size {
		s.writeError(w, r, errLogBeyondTree)
		return
	}
	recs, err := s.st.RecordsAfter(r.Context(), lr.projectID, first, t.W)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	entries := make([][]byte, 0, t.W)
	for i, rec := range recs {
		if rec.ReceivedSeq != first+int64(i)+1 {
			break
		}
		entries = append(entries, rec.ImmutableJSON())
	}
	body, err := acrtlog.EncodeBundle(entries)
	if errors.Is(err, acrtlog.ErrEntryTooLarge) {
		s.writeError(w, r, errLogEntryTooLarge)
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// C2SP tlog-tiles: "Entry bundles SHOULD be compressed at the HTTP
	// layer. Logs MAY use Content-Encoding: gzip with no negotiation, or
	// any compression algorithm requested by the client with
	// Accept-Encoding." Negotiated: gzip for a client that accepts it
	// (every Go client does), the bundle as it is otherwise. The ETag is
	// of the bytes sent, so the two representations have two tags.
	w.Header().Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		gz, err := s.gzipBundle(lr.projectID, t, body)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		body = gz
	}
	s.writeTileLike(w, r, lr, body)
}

// treeSize reads tree_size (default: the head's size) within the head.
func treeSize(q map[string]string, head store.TreeHead) (int64, bool, error) {
	v, ok := q["tree_size"]
	if !ok {
		return head.Size, false, nil
	}
	n, valid := parseSeq(v)
	if !valid || n < 1 {
		return 0, false, errTreeSizeBad
	}
	if n > head.Size {
		return 0, false, errLogBeyondTree
	}
	return n, true, nil
}

// hashReader reads the project's stored hashes (tlog.StoredHashIndex
// numbering) through the hash cache, computing the misses from tiles.
func (s *Server) hashReader(ctx context.Context, projectID string) tlog.HashReader {
	sr := acrtlog.NewStoreHashReader(ctx, func(ctx context.Context, tiles []tlog.Tile) ([][]byte, error) {
		return s.readTiles(ctx, projectID, tiles)
	})
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		var miss []int64
		var at []int
		c := s.hashes.cache()
		for i, x := range indexes {
			if h, ok := c.Get(hashKey{projectID, x}); ok {
				out[i] = h
			} else {
				miss, at = append(miss, x), append(at, i)
			}
		}
		if len(miss) == 0 {
			return out, nil
		}
		hs, err := sr.ReadHashes(miss)
		if err != nil {
			return nil, err
		}
		for j, x := range miss {
			out[at[j]] = hs[j]
			c.Add(hashKey{projectID, x}, hs[j])
		}
		return out, nil
	})
}

// hashCacheSize bounds the stored hashes kept in memory (about 100 bytes
// each with the key: at most about 6.5 MB).
const hashCacheSize = 1 << 16

// hashKey names a stored hash: the root of a complete subtree, which
// never changes, so a cached hash is never stale.
type hashKey struct {
	projectID string
	index     int64
}

// hashCache keeps the stored hashes proofs computed (the upper ones are
// in every proof), at most hashCacheSize, least recently used evicted
// first. The zero value is ready to use.
type hashCache struct {
	once sync.Once
	c    *lru.Cache[hashKey, tlog.Hash]
}

func (h *hashCache) cache() *lru.Cache[hashKey, tlog.Hash] {
	h.once.Do(func() { h.c, _ = lru.New[hashKey, tlog.Hash](hashCacheSize) }) // errors only on a size ≤ 0
	return h.c
}

// tileCacheSize bounds the tiles kept in memory: at most 8 KiB each, so
// at most 8 MiB.
const tileCacheSize = 1024

// tileKey names a tile at one width: its bytes never change (a full tile
// is immutable, and a partial tile's first W hashes are fixed once the
// tree holds them), so a cached tile is never stale.
type tileKey struct {
	projectID string
	l         int
	n         int64
	w         int
}

// tileCache keeps recently read tiles (proofs read the same upper tiles
// again and again), at most tileCacheSize, least recently used evicted
// first. The zero value is ready to use.
type tileCache struct {
	once sync.Once
	c    *lru.Cache[tileKey, []byte]
}

func (t *tileCache) cache() *lru.Cache[tileKey, []byte] {
	t.once.Do(func() { t.c, _ = lru.New[tileKey, []byte](tileCacheSize) })
	return t.c
}

// readTiles is store.Tree.ReadTiles through the cache: the misses in one
// store call.
func (s *Server) readTiles(ctx context.Context, projectID string, tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	var miss []tlog.Tile
	var at []int
	c := s.tiles.cache()
	for i, t := range tiles {
		if d, ok := c.Get(tileKey{projectID, t.L, t.N, t.W}); ok {
			out[i] = d
		} else {
			miss, at = append(miss, t), append(at, i)
		}
	}
	if len(miss) == 0 {
		return out, nil
	}
	data, err := s.st.ReadTiles(ctx, projectID, miss)
	if err != nil {
		return nil, err
	}
	for j, t := range miss {
		out[at[j]] = data[j]
		c.Add(tileKey{projectID, t.L, t.N, t.W}, data[j])
	}
	return out, nil
}

func (s *Server) writeProof(w http.ResponseWriter, r *http.Request, lr logRead, fixed bool, v any) {
	body, err := marshalJSON(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if fixed {
		w.Header().Set("Cache-Control", lr.cacheControl(cacheLogImmutable))
	} else {
		w.Header().Set("Cache-Control", lr.cacheControl(cacheLogHead))
	}
	s.writeRepresentation(w, r, mediaJSON, body)
}

func proofHashes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// serveInclusionProof: GET …/proof/inclusion?received_seq=S[&tree_size=N]
// → wire.InclusionProof of leaf S−1 in the tree of size N (default: the
// head's), tlog.ProveRecord over the stored tiles. Errors: 400
// received_seq_invalid, tree_size_invalid; 404 log_beyond_tree (N beyond
// the head, or S > N).
func (s *Server) serveInclusionProof(w http.ResponseWriter, r *http.Request, lr logRead, head store.TreeHead, q map[string]string) {
	seq, ok := parseSeq(q["received_seq"])
	if !ok || seq < 1 {
		s.writeError(w, r, errReceivedSeqBad)
		return
	}
	n, fixed, err := treeSize(q, head)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if seq > n {
		s.writeError(w, r, errLogBeyondTree)
		return
	}
	proof, err := tlog.ProveRecord(n, seq-1, s.hashReader(r.Context(), lr.projectID))
	if err != nil {
		s.writeError(w, r, s.proofError(r, lr, err))
		return
	}
	s.writeProof(w, r, lr, fixed, wire.InclusionProof{LeafIndex: seq - 1, TreeSize: n, Hashes: proofHashes(proof)})
}

// serveConsistencyProof: GET …/proof/consistency?old_size=M[&tree_size=N]
// → wire.ConsistencyProof between sizes M ≤ N (tlog.ProveTree; no hashes
// when M is 0 or N). Errors as serveInclusionProof.
func (s *Server) serveConsistencyProof(w http.ResponseWriter, r *http.Request, lr logRead, head store.TreeHead, q map[string]string) {
	old, ok := parseSeq(q["old_size"])
	if !ok {
		s.writeError(w, r, errTreeSizeBad)
		return
	}
	n, fixed, err := treeSize(q, head)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if old > n {
		s.writeError(w, r, errTreeSizeBad)
		return
	}
	hashes := [][]byte{}
	if old > 0 && old < n {
		proof, err := tlog.ProveTree(n, old, s.hashReader(r.Context(), lr.projectID))
		if err != nil {
			s.writeError(w, r, s.proofError(r, lr, err))
			return
		}
		hashes = proofHashes(proof)
	}
	s.writeProof(w, r, lr, fixed, wire.ConsistencyProof{OldSize: old, TreeSize: n, Hashes: hashes})
}

// proofError: a store error as it is; anything else (a tile the head
// needs is missing) is logged and 503.
func (s *Server) proofError(r *http.Request, lr logRead, err error) error {
	if errors.Is(err, store.ErrUnavailable) {
		return err
	}
	s.log.ErrorContext(r.Context(), "log proof failed", "project_id", lr.projectID, "err", err)
	return errLogUnavailable
}

// logCheckpointLink is the target of a read's Link rel
// relLogCheckpoint: the project's checkpoint, or the capability's.
func (s *Server) logCheckpointLink(base, projectID, capability string) string {
	if capability != "" {
		return base + "/v1/feeds/" + url.PathEscape(capability) + "/log/checkpoint"
	}
	return base + "/v1/log/" + projectID + "/checkpoint"
}

// inclusionTemplate is the RFC 6570 template of a record's inclusion
// proof (the Link-Template of record reads, rel relLogInclusionProof).
func inclusionTemplate(base, projectID string) string {
	return base + "/v1/log/" + projectID + "/proof/inclusion{?received_seq,tree_size}"
}

// profileLog is the profile page's section on the log (with the key).
func (s *Server) profileLog() string {
	if s.cfg.LogVerifierKey == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Verifiable log\n\n")
	b.WriteString("Each project's records form a transparency log (C2SP tlog-tiles under `/v1/log/{project_id}/`; ")
	b.WriteString("leaf i is the record with received_seq i+1). Checkpoints are signed by this relay's log key:\n\n")
	b.WriteString("    " + s.cfg.LogVerifierKey + "\n\n")
	b.WriteString("also served at `" + logKeyPath + "`.\n")
	return b.String()
}
