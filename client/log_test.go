package client

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/wire"
)

const logProject = "11111111-1111-4111-8111-111111111111"

// testTree is a real RFC 6962 tree (x/mod tlog) over leaves.
type testTree struct {
	leaves [][]byte
	hashes []tlog.Hash // stored hashes, in tlog's order
}

func (tt *testTree) reader() tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x >= int64(len(tt.hashes)) {
				return nil, fmt.Errorf("hash %d not stored", x)
			}
			out[i] = tt.hashes[x]
		}
		return out, nil
	})
}

func (tt *testTree) add(t testing.TB, leaf []byte) {
	t.Helper()
	hs, err := tlog.StoredHashes(int64(len(tt.leaves)), leaf, tt.reader())
	if err != nil {
		t.Fatal(err)
	}
	tt.leaves = append(tt.leaves, leaf)
	tt.hashes = append(tt.hashes, hs...)
}

func (tt *testTree) root(t testing.TB, n int64) tlog.Hash {
	t.Helper()
	h, err := tlog.TreeHash(n, tt.reader())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testRecord is the record with received_seq seq as the relay would
// serve it (its event need not be a signed one for the log).
func testRecord(seq int64, text string) Record {
	return Record{
		Raw:     json.RawMessage(`{"project_id":"` + logProject + `","text":"` + text + `"}`),
		Receipt: Receipt{ReceivedSeq: seq, ReceivedAt: "2026-12-06T10:00:00.000Z"},
	}
}

// logServer serves a project's log from real trees the way the relay
// does (C2SP paths, partial tiles, proofs). Requests with the token
// "fork" see the fork tree when one is set: a relay showing one reader
// another history.
type logServer struct {
	t      testing.TB
	signer note.Signer
	vkey   string
	origin string

	mu          sync.Mutex
	tree        *testTree
	size        int64 // the published size (≤ len(tree.leaves))
	fork        *testTree
	noPartial   bool                    // 404 for partial tiles whose full tile exists
	bundleEdit  func([][]byte) [][]byte // changes bundles as served
	checkpoints int
}

func newLogServer(t testing.TB, n int) (*logServer, *httptest.Server) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "relay.test")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	ls := &logServer{t: t, signer: signer, vkey: vkey, tree: &testTree{}}
	ls.grow(n)
	srv := httptest.NewServer(ls)
	t.Cleanup(srv.Close)
	ls.origin = strings.TrimPrefix(srv.URL, "http://") + "/" + logProject
	return ls, srv
}

func (ls *logServer) grow(n int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for range n {
		seq := int64(len(ls.tree.leaves)) + 1
		ls.tree.add(ls.t, RecordLeaf(testRecord(seq, "record "+strconv.FormatInt(seq, 10))))
	}
	ls.size = int64(len(ls.tree.leaves))
}

// forkAt makes the fork: the same records but leaf k's text changed.
func (ls *logServer) forkAt(k int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	f := &testTree{}
	for i, l := range ls.tree.leaves {
		if int64(i) == k {
			l = RecordLeaf(testRecord(k+1, "rewritten"))
		}
		f.add(ls.t, l)
	}
	ls.fork = f
}

func (ls *logServer) verifier(t testing.TB) note.Verifier {
	v, err := note.NewVerifier(ls.vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (ls *logServer) checkpoint(tt *testTree, n int64) []byte {
	root := tt.root(ls.t, n)
	text := fmt.Sprintf("%s\n%d\n%s\n", ls.origin, n, base64.StdEncoding.EncodeToString(root[:]))
	msg, err := note.Sign(&note.Note{Text: text}, ls.signer)
	if err != nil {
		ls.t.Fatal(err)
	}
	return msg
}

func encodeTestBundle(entries [][]byte) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, uint16(len(e)))
		b = append(b, e...)
	}
	return b
}

func (ls *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	tt, n := ls.tree, ls.size
	if ls.fork != nil && r.Header.Get("Authorization") == "Bearer fork" {
		tt = ls.fork
	}
	if r.URL.Path == "/v1/log-key" {
		w.Write([]byte(ls.vkey + "\n"))
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/log/"+logProject+"/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch {
	case rest == "checkpoint":
		ls.checkpoints++
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(ls.checkpoint(tt, n))
		return
	case rest == "proof/inclusion":
		seq, _ := strconv.ParseInt(r.URL.Query().Get("received_seq"), 10, 64)
		size, _ := strconv.ParseInt(r.URL.Query().Get("tree_size"), 10, 64)
		p, err := tlog.ProveRecord(size, seq-1, tt.reader())
		if err != nil {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(wire.InclusionProof{LeafIndex: seq - 1, TreeSize: size, Hashes: hashBytes(p)})
		return
	case rest == "proof/consistency":
		old, _ := strconv.ParseInt(r.URL.Query().Get("old_size"), 10, 64)
		size, _ := strconv.ParseInt(r.URL.Query().Get("tree_size"), 10, 64)
		p, err := tlog.ProveTree(size, old, tt.reader())
		if err != nil {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(wire.ConsistencyProof{OldSize: old, TreeSize: size, Hashes: hashBytes(p)})
		return
	}
	// x/mod names tiles tile/H/L/N[.p/W] and bundles tile/H/data/N: put
	// the height in and let it parse.
	xp := "tile/8/" + strings.TrimPrefix(rest, "tile/")
	xp = strings.Replace(xp, "tile/8/entries/", "tile/8/data/", 1)
	tile, err := tlog.ParseTilePath(xp)
	if err != nil || !strings.HasPrefix(rest, "tile/") {
		http.NotFound(w, r)
		return
	}
	// The tile must exist in the published tree.
	if tile.L >= 0 {
		width := (n >> (8 * tile.L)) - tile.N*256
		if tile.W < 256 && width >= 256 && ls.noPartial {
			http.NotFound(w, r) // a partial tile deleted once the full one exists
			return
		}
		if width < int64(tile.W) {
			http.NotFound(w, r)
			return
		}
		data, err := tlog.ReadTileData(tile, tt.reader())
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
		return
	}
	first := tile.N * 256
	if first+int64(tile.W) > n {
		http.NotFound(w, r)
		return
	}
	entries := tt.leaves[first : first+int64(tile.W)]
	if ls.bundleEdit != nil {
		entries = ls.bundleEdit(append([][]byte(nil), entries...))
	}
	w.Write(encodeTestBundle(entries))
}

func hashBytes(hs []tlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

func logClient(t testing.TB, srv *httptest.Server, token string) *Client {
	t.Helper()
	c, err := New(srv.URL, token)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = RetryPolicy{MaxAttempts: 1}
	return c
}

func TestAuditHonestLogAndConsistency(t *testing.T) {
	ls, srv := newLogServer(t, 600)
	l := logClient(t, srv, "").Log(logProject, ls.verifier(t))
	ctx := t.Context()
	rep, err := l.Audit(ctx, nil, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Checkpoint.Size != 600 || rep.From != 0 || rep.To != 600 || rep.Checked != 600 || rep.Consistent {
		t.Fatalf("first audit %+v", rep)
	}
	if rep.Checkpoint.Origin != ls.origin {
		t.Fatalf("origin %q, want %q", rep.Checkpoint.Origin, ls.origin)
	}
	ls.grow(700)
	rep2, err := l.Audit(ctx, rep.Checkpoint, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Checkpoint.Size != 1300 || rep2.From != 600 || rep2.To != 1300 || rep2.Checked != 700 || !rep2.Consistent {
		t.Fatalf("second audit %+v", rep2)
	}
	// A record's inclusion at the older checkpoint (size 1300) once the
	// log has grown past it and dropped the partial tiles of 1300 (the
	// client cuts them from the full ones), then every record.
	ls.grow(212) // 1512 = 5 full tiles + 232
	ls.mu.Lock()
	ls.noPartial = true
	ls.mu.Unlock()
	l2 := logClient(t, srv, "").Log(logProject, ls.verifier(t)) // no tile cached
	if err := l2.CheckRecord(ctx, rep2.Checkpoint, testRecord(1290, "record 1290")); err != nil {
		t.Fatal(err)
	}
	if err := l2.CheckRecord(ctx, rep2.Checkpoint, testRecord(1290, "record 1291")); !errors.Is(err, ErrNotIncluded) {
		t.Fatalf("a changed record: %v", err)
	}
	ls.mu.Lock()
	ls.noPartial = false
	ls.mu.Unlock()
	rep3, err := l.Audit(ctx, rep2.Checkpoint, AuditOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep3.From != 0 || rep3.To != 1512 || rep3.Checked != 1512 {
		t.Fatalf("audit --all %+v", rep3)
	}
}

func TestAuditCatchesBadEntries(t *testing.T) {
	// 300 records: bundle 000 (256 entries) and 001.p/44; the edits
	// change bundle 000 as served, as a store edited behind the relay's
	// back would.
	for _, tc := range []struct {
		name string
		edit func([][]byte) [][]byte
		want error
		msg  string
	}{
		{"record bytes", func(e [][]byte) [][]byte {
			e[37] = bytes.Replace(e[37], []byte("record 38"), []byte("record 3B"), 1)
			return e
		}, ErrNotIncluded, "entry 37 (received_seq 38) of bundle tile/entries/000 does not hash to the tree's leaf"},
		{"receipt", func(e [][]byte) [][]byte {
			e[5] = bytes.Replace(e[5], []byte("10:00:00.000Z"), []byte("10:00:01.000Z"), 1)
			return e
		}, ErrNotIncluded, "entry 5 (received_seq 6) of bundle"},
		{"deleted row", func(e [][]byte) [][]byte { return append(e[:100], e[101:]...) },
			ErrNotIncluded, "entry 100 (received_seq 101) of bundle"},
		{"deleted last row", func(e [][]byte) [][]byte { return e[:255] },
			ErrMalformedRecord, "entry bundle tile/entries/000 holds 255 entries, want 256"},
		{"deleted row, the bundle refilled", func(e [][]byte) [][]byte {
			return append(append(e[:100], e[101:]...), RecordLeaf(testRecord(257, "record 257")))
		}, ErrNotIncluded, "entry 100 (received_seq 101) of bundle"},
		{"unchanged", func(e [][]byte) [][]byte { return e }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls, srv := newLogServer(t, 300)
			ls.bundleEdit = func(e [][]byte) [][]byte {
				if len(e) == 256 {
					return tc.edit(e)
				}
				return e
			}
			l := logClient(t, srv, "").Log(logProject, ls.verifier(t))
			rep, err := l.Audit(t.Context(), nil, AuditOptions{})
			if tc.want == nil {
				if err != nil || rep.Checked != 300 {
					t.Fatalf("audit %+v, %v", rep, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("audit error %v, want %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// A tree whose leaf is not the record with received_seq index+1 (a relay
// that integrated records out of order) fails CheckEntry even though
// every hash matches.
func TestAuditCatchesMisnumberedLeaf(t *testing.T) {
	ls, srv := newLogServer(t, 0)
	ls.mu.Lock()
	for i := int64(1); i <= 10; i++ {
		seq := i
		if i == 4 {
			seq = 5
		} else if i == 5 {
			seq = 4
		}
		ls.tree.add(t, RecordLeaf(testRecord(seq, "r")))
	}
	ls.size = 10
	ls.mu.Unlock()
	l := logClient(t, srv, "").Log(logProject, ls.verifier(t))
	rep, err := l.Audit(t.Context(), nil, AuditOptions{})
	if !errors.Is(err, ErrEntryInvalid) || err.Error() != "log entry is not the record it should be: entry 3 holds received_seq 5, want 4" {
		t.Fatalf("audit error %v", err)
	}
	if rep.Checked != 3 {
		t.Fatalf("checked %d before the failure, want 3", rep.Checked)
	}
}

// A relay that shows one reader (token "fork") a tree with a rewritten
// record is caught when two readers compare checkpoints: the evidence is
// both signed notes, each verifying under the log key.
func TestSplitViewCaughtByComparingCheckpoints(t *testing.T) {
	ls, srv := newLogServer(t, 500)
	ls.forkAt(42)
	ctx := t.Context()
	a := logClient(t, srv, "honest").Log(logProject, ls.verifier(t))
	b := logClient(t, srv, "fork").Log(logProject, ls.verifier(t))
	ra, err := a.Audit(ctx, nil, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The forked reader's own audit passes: its view is self-consistent.
	rb, err := b.Audit(ctx, nil, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := CompareCheckpoints(ra.Checkpoint, ra.Checkpoint); err != nil {
		t.Fatal(err)
	}
	err = CompareCheckpoints(ra.Checkpoint, rb.Checkpoint)
	var sv *SplitView
	if !errors.As(err, &sv) {
		t.Fatalf("compare: %v, want *SplitView", err)
	}
	ev, err := json.Marshal(sv)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Reason, Origin string
		A              string `json:"checkpoint_a"`
		B              string `json:"checkpoint_b"`
	}
	if err := json.Unmarshal(ev, &got); err != nil {
		t.Fatal(err)
	}
	if got.Reason != "two roots for one tree size" || got.Origin != ls.origin ||
		got.A != string(ra.Checkpoint.Note) || got.B != string(rb.Checkpoint.Note) {
		t.Fatalf("evidence %s", ev)
	}
	for _, n := range []string{got.A, got.B} { // anyone can check both with the key
		if cp, err := ParseCheckpoint([]byte(n), ls.verifier(t)); err != nil || cp.Size != 500 {
			t.Fatalf("evidence note: %+v, %v", cp, err)
		}
	}
	// The forked reader, later shown the honest log grown, finds no
	// consistency from what it saw.
	ls.mu.Lock()
	ls.fork = nil
	ls.mu.Unlock()
	ls.grow(20)
	_, err = b.Audit(ctx, rb.Checkpoint, AuditOptions{})
	if !errors.As(err, &sv) || !strings.HasPrefix(sv.Reason, "the newer tree does not extend the older") || sv.A != rb.Checkpoint || sv.B.Size != 520 {
		t.Fatalf("audit after the fork: %v", err)
	}
	// And the JSON consistency proof says the same.
	if _, err := b.ConsistencyProof(ctx, rb.Checkpoint, sv.B); !errors.As(err, &sv) {
		t.Fatalf("consistency proof after the fork: %v", err)
	}
	if _, err := a.ConsistencyProof(ctx, ra.Checkpoint, sv.B); err != nil {
		t.Fatalf("honest consistency proof: %v", err)
	}
}

func TestAuditRefusesRollbackAndForeignSignature(t *testing.T) {
	ls, srv := newLogServer(t, 300)
	ctx := t.Context()
	l := logClient(t, srv, "").Log(logProject, ls.verifier(t))
	rep, err := l.Audit(ctx, nil, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ls.mu.Lock()
	ls.size = 299
	ls.mu.Unlock()
	var sv *SplitView
	if _, err := l.Audit(ctx, rep.Checkpoint, AuditOptions{}); !errors.As(err, &sv) || sv.Reason != "tree size went back" {
		t.Fatalf("rollback: %v", err)
	}
	// Another origin than the one pinned.
	l2 := logClient(t, srv, "").Log(logProject, ls.verifier(t))
	l2.Origin = "elsewhere.example/" + logProject
	if _, err := l2.Checkpoint(ctx); !errors.Is(err, ErrCheckpointInvalid) ||
		err.Error() != fmt.Sprintf("checkpoint invalid: origin %q, want %q", ls.origin, l2.Origin) {
		t.Fatalf("other origin: %v", err)
	}
	// A checkpoint signed by another key of the same name.
	skey, _, err := note.GenerateKey(rand.Reader, "relay.test")
	if err != nil {
		t.Fatal(err)
	}
	ls.mu.Lock()
	ls.signer, _ = note.NewSigner(skey)
	ls.mu.Unlock()
	if _, err := l.Checkpoint(ctx); !errors.Is(err, ErrCheckpointInvalid) || err.Error() != "checkpoint invalid: note has no verifiable signatures" {
		t.Fatalf("foreign signature: %v", err)
	}
}

func TestInclusionChecker(t *testing.T) {
	ls, srv := newLogServer(t, 10)
	ctx := t.Context()
	c := logClient(t, srv, "")
	ic := c.NewInclusionChecker(ls.verifier(t))
	ic.Wait, ic.Poll = 3*time.Second, 20*time.Millisecond
	for seq := int64(1); seq <= 10; seq++ {
		if err := ic.Check(ctx, testRecord(seq, "record "+strconv.FormatInt(seq, 10))); err != nil {
			t.Fatal(err)
		}
	}
	ls.mu.Lock()
	fetched := ls.checkpoints
	ls.mu.Unlock()
	if fetched != 1 {
		t.Fatalf("%d checkpoint fetches for 10 records, want 1", fetched)
	}
	// A record newer than the checkpoint waits for the next.
	go func() {
		time.Sleep(100 * time.Millisecond)
		ls.grow(5)
	}()
	if err := ic.Check(ctx, testRecord(13, "record 13")); err != nil {
		t.Fatal(err)
	}
	if err := ic.Check(ctx, testRecord(14, "record 14 changed")); !errors.Is(err, ErrNotIncluded) {
		t.Fatalf("changed record: %v", err)
	}
	ic.Wait = 100 * time.Millisecond
	err := ic.Check(ctx, testRecord(16, "record 16"))
	if !errors.Is(err, ErrCheckpointBehind) || err.Error() != "no checkpoint covers the record yet: received_seq 16, checkpoint size 15 after 100ms" {
		t.Fatalf("record never covered: %v", err)
	}
}

func TestJSONProofs(t *testing.T) {
	ls, srv := newLogServer(t, 777)
	ctx := t.Context()
	l := logClient(t, srv, "").Log(logProject, ls.verifier(t))
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.InclusionProof(ctx, cp, 300, RecordLeaf(testRecord(300, "record 300")))
	if err != nil {
		t.Fatal(err)
	}
	if p.LeafIndex != 299 || p.TreeSize != 777 || len(p.Hashes) != 10 {
		t.Fatalf("proof %+v", p)
	}
	if _, err := l.InclusionProof(ctx, cp, 300, RecordLeaf(testRecord(300, "record 301"))); !errors.Is(err, ErrNotIncluded) {
		t.Fatalf("wrong leaf: %v", err)
	}
	ls.grow(100)
	cp2, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cpp, err := l.ConsistencyProof(ctx, cp, cp2)
	if err != nil || cpp.OldSize != 777 || cpp.TreeSize != 877 {
		t.Fatalf("consistency %+v, %v", cpp, err)
	}
}

func TestAuditStateRoundTrip(t *testing.T) {
	path := t.TempDir() + "/audit.json"
	s, err := LoadAuditState(path)
	if err != nil || *s != (AuditState{}) {
		t.Fatalf("missing file: %+v, %v", s, err)
	}
	want := AuditState{Origin: "o/p", LogKey: "k+1+x", Checkpoint: "o/p\n1\n", Entries: 7, CheckedAt: "2026-12-06T10:00:00Z"}
	if err := want.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadAuditState(path)
	if err != nil || *got != want {
		t.Fatalf("round trip %+v, %v", got, err)
	}
}

// FuzzCheckEntry: an entry's bytes, whatever they are, are either refused
// or are exactly the canonical record they decode to, with received_seq
// index+1.
func FuzzCheckEntry(f *testing.F) {
	f.Add(RecordLeaf(testRecord(1, "one")), int64(0))
	f.Add(RecordLeaf(testRecord(7, "x")), int64(5))
	f.Add([]byte(`{"event":{},"receipt":{"received_at":"","received_seq":"01"}}`), int64(0))
	f.Add([]byte(`{"receipt":{"received_seq":"1"},"event":1}`), int64(0))
	c, _ := New("http://relay.test", "")
	l := c.Log(logProject, nil)
	f.Fuzz(func(t *testing.T, data []byte, index int64) {
		r, err := l.CheckEntry(Entry{Index: index, Data: data})
		if err != nil {
			if !errors.Is(err, ErrEntryInvalid) {
				t.Fatalf("error %v is not ErrEntryInvalid", err)
			}
			return
		}
		if r.Receipt.ReceivedSeq != index+1 || !bytes.Equal(RecordLeaf(r), data) {
			t.Fatalf("accepted %q at %d as %+v", data, index, r.Receipt)
		}
	})
}
