package relay_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/client"
	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/sequencer"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/postgres"
	"github.com/acrelay/acrelay/store/sqlite"
	acrtlog "github.com/acrelay/acrelay/tlog"
	"github.com/acrelay/acrelay/wire"
)

// logEnv is a relay with a log key and a sequencer the test drives
// (integrate), over a store it can also edit behind the relay's back
// (exec: the same statement for SQLite "?" and PostgreSQL "$n").
type logEnv struct {
	*env
	seq  *sequencer.Sequencer
	key  acrtlog.LogKey
	exec func(t *testing.T, query string, args ...any)
}

func newLogEnv(t *testing.T) *logEnv {
	t.Helper()
	ctx := context.Background()
	le := &logEnv{}
	var st store.Store
	var err error
	if os.Getenv("ACRELAY_RELAY_TEST_STORE") == "postgres" {
		dbURL := pgtest.FreshDatabase(t)
		if st, err = postgres.Open(ctx, dbURL, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		le.exec = func(t *testing.T, q string, args ...any) {
			t.Helper()
			conn, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			for i := 1; strings.Contains(q, "?"); i++ {
				q = strings.Replace(q, "?", "$"+strconv.Itoa(i), 1)
			}
			if _, err := conn.Exec(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		path := filepath.Join(t.TempDir(), "acrelay.db")
		if st, err = sqlite.Open(ctx, path, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		le.exec = func(t *testing.T, q string, args ...any) {
			t.Helper()
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() { st.Close() })
	skey, _, err := acrtlog.NewLogKey("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	if le.key, err = acrtlog.OpenLogKey(skey); err != nil {
		t.Fatal(err)
	}
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", LogVerifierKey: le.key.VerifierKey, LogSigner: le.key.Signer})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	le.env = &env{t: t, st: st, srv: srv, url: srv.URL}
	le.seq = sequencer.New(st, sequencer.Options{PublicURL: "http://relay.test", Key: le.key})
	return le
}

func (le *logEnv) integrate(t *testing.T, projectID string) store.TreeHead {
	t.Helper()
	h, err := le.seq.Integrate(context.Background(), projectID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// postN posts n intents to repo and returns the records as served.
func (le *logEnv) postN(t *testing.T, a *agent, repo string, n int) {
	t.Helper()
	for i := range n {
		mustStatus(t, le.post(a, a.intent(repo, fmt.Sprintf("step %d", i))), 201)
	}
}

func (le *logEnv) client(t *testing.T, tok string) *client.Client {
	t.Helper()
	c, err := client.New(le.url, tok)
	if err != nil {
		t.Fatal(err)
	}
	c.Retry = client.RetryPolicy{MaxAttempts: 1}
	return c
}

// RFC 9162 §2.1.3.2, written from the RFC alone: verify an inclusion proof.
func rfcVerifyInclusion(leafIndex, treeSize int64, leafHash, root [32]byte, path [][]byte) bool {
	if leafIndex >= treeSize {
		return false
	}
	node := func(l, r []byte) [32]byte { return sha256.Sum256(append(append([]byte{1}, l...), r...)) }
	fn, sn, r := leafIndex, treeSize-1, leafHash
	for _, p := range path {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			r = node(p, r[:])
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = node(r[:], p)
		}
		fn >>= 1
		sn >>= 1
	}
	return sn == 0 && r == root
}

// RFC 9162 §2.1.4.2, written from the RFC alone: verify a consistency proof.
func rfcVerifyConsistency(first, second int64, firstHash, secondHash [32]byte, path [][]byte) bool {
	if first == second {
		return len(path) == 0 && firstHash == secondHash
	}
	if first == 0 || first > second || len(path) == 0 {
		return false
	}
	if first&(first-1) == 0 {
		path = append([][]byte{firstHash[:]}, path...)
	}
	node := func(l, r []byte) [32]byte { return sha256.Sum256(append(append([]byte{1}, l...), r...)) }
	fn, sn := first-1, second-1
	for fn&1 == 1 {
		fn >>= 1
		sn >>= 1
	}
	var fr, sr [32]byte
	copy(fr[:], path[0])
	copy(sr[:], path[0])
	for _, c := range path[1:] {
		if sn == 0 {
			return false
		}
		if fn&1 == 1 || fn == sn {
			fr = node(c, fr[:])
			sr = node(c, sr[:])
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			sr = node(sr[:], c)
		}
		fn >>= 1
		sn >>= 1
	}
	return fr == firstHash && sr == secondHash && sn == 0
}

// TestLogReads: a private project's log read with its token — the
// checkpoint, tiles and bundles with their exact headers, the bundles'
// entries byte for byte the records the events route serves, every
// proof checked by x/mod's verifier and by the RFC 9162 one above, and
// the refusals with their codes.
func TestLogReads(t *testing.T) {
	le := newLogEnv(t)
	pid, tok := le.newProject("")
	a := le.newAgent(pid, tok)
	le.postN(t, a, "repo", 300)
	head := le.integrate(t, pid)
	if head.Size != 300 {
		t.Fatalf("integrated %d", head.Size)
	}
	prefix := "/v1/log/" + pid + "/"

	// The checkpoint: the stored note, short-lived, revalidated by ETag.
	r := le.do("GET", prefix+"checkpoint", tok, nil)
	mustStatus(t, r, 200)
	if !bytes.Equal(r.Body, head.Checkpoint) {
		t.Fatalf("checkpoint %q, want the stored %q", r.Body, head.Checkpoint)
	}
	for k, want := range map[string]string{"Content-Type": "text/plain; charset=utf-8", "Cache-Control": "private, max-age=1", "Vary": "Authorization"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("checkpoint %s %q, want %q", k, got, want)
		}
	}
	cp, n, err := acrtlog.OpenCheckpoint(r.Body, le.key.Verifier, acrtlog.Origin("http://relay.test", pid))
	if err != nil || cp.Size != 300 || cp.Root != head.Root || len(n.Sigs) != 1 {
		t.Fatalf("checkpoint opens as %+v, %v", cp, err)
	}
	mustStatus(t, le.do("GET", prefix+"checkpoint", tok, nil, "If-None-Match", r.Header.Get("ETag")), 304)

	// Tiles: 0/000 full, 0/001.p/44, 1/000.p/1: all immutable (C2SP
	// tlog-tiles: the tile endpoint is immutable, a partial tile's path
	// names its width).
	for _, tc := range []struct {
		path, cache string
		len         int
	}{
		{"tile/0/000", "private, max-age=31536000, immutable", 8192},
		{"tile/0/001.p/44", "private, max-age=31536000, immutable", 44 * 32},
		{"tile/0/001.p/7", "private, max-age=31536000, immutable", 7 * 32},
		{"tile/1/000.p/1", "private, max-age=31536000, immutable", 32},
	} {
		r := le.do("GET", prefix+tc.path, tok, nil)
		mustStatus(t, r, 200)
		if len(r.Body) != tc.len || r.Header.Get("Cache-Control") != tc.cache || r.Header.Get("Content-Type") != "application/octet-stream" || r.Header.Get("ETag") == "" {
			t.Errorf("%s: %d bytes, headers %v", tc.path, len(r.Body), r.Header)
		}
	}
	// Bundles: each entry is the record exactly as GET /events serves it.
	var served [][]byte
	for rec, err := range le.client(t, tok).Events(t.Context(), client.EventsQuery{RepositoryID: "repo", Limit: 200}) {
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, client.RecordLeaf(rec))
	}
	for _, b := range []struct {
		path  string
		first int
		cache string
	}{{"tile/entries/000", 0, "private, max-age=31536000, immutable"}, {"tile/entries/001.p/44", 256, "private, max-age=31536000, immutable"}} {
		// Without Accept-Encoding: the bundle as it is.
		r := le.do("GET", prefix+b.path, tok, nil, "Accept-Encoding", "identity")
		mustStatus(t, r, 200)
		entries, err := acrtlog.DecodeBundle(r.Body)
		if err != nil || r.Header.Get("Cache-Control") != b.cache || r.Header.Get("Content-Encoding") != "" || !slices.Contains(r.Header.Values("Vary"), "Accept-Encoding") {
			t.Fatalf("%s: %v, %v", b.path, err, r.Header)
		}
		// Accepting gzip (C2SP tlog-tiles: bundles SHOULD be compressed):
		// the same bytes gzipped, another ETag, and a 304 on it.
		gz := le.do("GET", prefix+b.path, tok, nil, "Accept-Encoding", "br;q=1, gzip;q=0.5")
		mustStatus(t, gz, 200)
		zr, err := gzip.NewReader(bytes.NewReader(gz.Body))
		if err != nil {
			t.Fatalf("%s gzip: %v, %v", b.path, err, gz.Header)
		}
		plain, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(plain, r.Body) || gz.Header.Get("Content-Encoding") != "gzip" || len(gz.Body) >= len(r.Body)/3 ||
			gz.Header.Get("ETag") == r.Header.Get("ETag") || gz.Header.Get("Cache-Control") != b.cache || gz.Header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("%s gzip: %d bytes for %d, %v, %v", b.path, len(gz.Body), len(r.Body), err, gz.Header)
		}
		mustStatus(t, le.do("GET", prefix+b.path, tok, nil, "Accept-Encoding", "gzip", "If-None-Match", gz.Header.Get("ETag")), 304)
		if r := le.do("GET", prefix+b.path, tok, nil, "Accept-Encoding", "gzip;q=0, *"); r.Header.Get("Content-Encoding") != "" || !bytes.Equal(r.Body, plain) {
			t.Fatalf("%s gzip;q=0: %v", b.path, r.Header)
		}
		for i, e := range entries {
			if !bytes.Equal(e, served[b.first+i]) {
				t.Fatalf("%s entry %d:\n%s\nserved\n%s", b.path, i, e, served[b.first+i])
			}
		}
	}

	// Proofs, checked by x/mod tlog and by RFC 9162 alone.
	cpSize := func(n int64) [32]byte {
		hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			return acrtlog.NewStoreHashReader(t.Context(), func(ctx context.Context, tiles []tlog.Tile) ([][]byte, error) {
				return le.st.ReadTiles(ctx, pid, tiles)
			}).ReadHashes(idx)
		})
		h, err := tlog.TreeHash(n, hr)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct{ seq, size int64 }{{1, 300}, {256, 300}, {300, 300}, {17, 17}, {100, 257}, {1, 1}} {
		r := le.do("GET", fmt.Sprintf("%sproof/inclusion?received_seq=%d&tree_size=%d", prefix, tc.seq, tc.size), tok, nil)
		mustStatus(t, r, 200)
		var p wire.InclusionProof
		if err := json.Unmarshal(r.Body, &p); err != nil || p.LeafIndex != tc.seq-1 || p.TreeSize != tc.size {
			t.Fatalf("inclusion %+v: %+v, %v", tc, p, err)
		}
		if r.Header.Get("Cache-Control") != "private, max-age=31536000, immutable" || r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Errorf("inclusion headers %v", r.Header)
		}
		leaf := tlog.RecordHash(served[tc.seq-1])
		root := cpSize(tc.size)
		hs := make(tlog.RecordProof, len(p.Hashes))
		for i := range p.Hashes {
			copy(hs[i][:], p.Hashes[i])
		}
		if err := tlog.CheckRecord(hs, tc.size, root, tc.seq-1, leaf); err != nil {
			t.Errorf("inclusion %+v: x/mod: %v", tc, err)
		}
		if !rfcVerifyInclusion(tc.seq-1, tc.size, leaf, root, p.Hashes) {
			t.Errorf("inclusion %+v: RFC 9162 verifier refuses", tc)
		}
		if rfcVerifyInclusion(tc.seq-1, tc.size, tlog.RecordHash([]byte("other")), root, p.Hashes) {
			t.Errorf("inclusion %+v: RFC 9162 verifier accepts another leaf", tc)
		}
	}
	for _, tc := range []struct{ old, size int64 }{{1, 300}, {2, 300}, {255, 256}, {256, 300}, {123, 299}, {300, 300}, {0, 300}} {
		r := le.do("GET", fmt.Sprintf("%sproof/consistency?old_size=%d&tree_size=%d", prefix, tc.old, tc.size), tok, nil)
		mustStatus(t, r, 200)
		var p wire.ConsistencyProof
		if err := json.Unmarshal(r.Body, &p); err != nil || p.OldSize != tc.old || p.TreeSize != tc.size {
			t.Fatalf("consistency %+v: %+v, %v", tc, p, err)
		}
		if tc.old == 0 || tc.old == tc.size {
			if len(p.Hashes) != 0 {
				t.Fatalf("consistency %+v: %d hashes", tc, len(p.Hashes))
			}
			continue
		}
		older, newer := cpSize(tc.old), cpSize(tc.size)
		hs := make(tlog.TreeProof, len(p.Hashes))
		for i := range p.Hashes {
			copy(hs[i][:], p.Hashes[i])
		}
		if err := tlog.CheckTree(hs, tc.size, newer, tc.old, older); err != nil {
			t.Errorf("consistency %+v: x/mod: %v", tc, err)
		}
		if !rfcVerifyConsistency(tc.old, tc.size, older, newer, p.Hashes) {
			t.Errorf("consistency %+v: RFC 9162 verifier refuses", tc)
		}
		if rfcVerifyConsistency(tc.old, tc.size, cpSize(tc.old+1), newer, p.Hashes) {
			t.Errorf("consistency %+v: RFC 9162 verifier accepts another old root", tc)
		}
	}
	// Without tree_size: the head's, short-lived.
	r = le.do("GET", prefix+"proof/inclusion?received_seq=5", tok, nil)
	mustStatus(t, r, 200)
	if r.Header.Get("Cache-Control") != "private, max-age=1" || !strings.Contains(string(r.Body), `"tree_size":300`) {
		t.Errorf("inclusion at the head: %s %v", r.Body, r.Header)
	}

	// Refusals.
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"tile/0/002", 404, "log_beyond_tree"},
		{"tile/0/001", 404, "log_beyond_tree"},
		{"tile/0/001.p/45", 404, "log_beyond_tree"},
		{"tile/1/000", 404, "log_beyond_tree"},
		{"tile/entries/001", 404, "log_beyond_tree"},
		{"tile/entries/001.p/45", 404, "log_beyond_tree"},
		{"tile/0/1", 404, "log_path_invalid"},
		{"tile/0/x000/001", 404, "log_path_invalid"},
		{"tile/0/000.p/0", 404, "log_path_invalid"},
		{"tile/0/000.p/256", 404, "log_path_invalid"},
		{"tile/64/000", 404, "log_path_invalid"},
		{"tile/data/000", 404, "log_path_invalid"},
		{"checkpoints", 404, "log_path_invalid"},
		{"checkpoint?x=1", 400, "query_invalid"},
		{"proof/inclusion?received_seq=0", 400, "received_seq_invalid"},
		{"proof/inclusion?received_seq=01", 400, "received_seq_invalid"},
		{"proof/inclusion", 400, "received_seq_invalid"},
		{"proof/inclusion?received_seq=301", 404, "log_beyond_tree"},
		{"proof/inclusion?received_seq=5&tree_size=4", 404, "log_beyond_tree"},
		{"proof/inclusion?received_seq=5&tree_size=301", 404, "log_beyond_tree"},
		{"proof/inclusion?received_seq=5&tree_size=0", 400, "tree_size_invalid"},
		{"proof/inclusion?received_seq=5&leaf=1", 400, "query_invalid"},
		{"proof/consistency?old_size=5&tree_size=4", 400, "tree_size_invalid"},
		{"proof/consistency?old_size=-1", 400, "tree_size_invalid"},
		{"proof/consistency?old_size=1&tree_size=301", 404, "log_beyond_tree"},
	} {
		wantCode(t, le.do("GET", prefix+tc.path, tok, nil), tc.status, tc.code)
	}

	// Read rules: no token on a private project 401; another project's
	// token 404; a project with no record yet answers the checkpoint of
	// its empty tree (size 0, root SHA-256(""): C2SP tlog-witness), and
	// log_empty for the rest.
	wantCode(t, le.do("GET", prefix+"checkpoint", "", nil), 401, "unauthorized")
	other, otherTok := le.newProject("")
	wantCode(t, le.do("GET", prefix+"checkpoint", otherTok, nil), 404, "not_found")
	r = le.do("GET", "/v1/log/"+other+"/checkpoint", otherTok, nil)
	mustStatus(t, r, 200)
	if cp, _, err := acrtlog.OpenCheckpoint(r.Body, le.key.Verifier, acrtlog.Origin("http://relay.test", other)); err != nil || cp.Size != 0 ||
		base64.StdEncoding.EncodeToString(cp.Root[:]) != "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" || r.Header.Get("Cache-Control") != "private, max-age=1" {
		t.Fatalf("empty log's checkpoint %q: %+v, %v", r.Body, cp, err)
	}
	wantCode(t, le.do("GET", "/v1/log/"+other+"/tile/0/000.p/1", otherTok, nil), 404, "log_empty")
	wantCode(t, le.do("GET", prefix+"checkpoint", operatorToken, nil), 403, "project_token_required")

	// The client SDK audits the whole log through these routes.
	c := le.client(t, tok)
	l := c.Log(pid, le.key.Verifier)
	rep, err := l.Audit(t.Context(), nil, client.AuditOptions{})
	if err != nil || rep.Checked != 300 {
		t.Fatalf("audit %+v, %v", rep, err)
	}
	// The key and the profile.
	r = le.do("GET", "/v1/log-key", "", nil)
	mustStatus(t, r, 200)
	if string(r.Body) != le.key.VerifierKey+"\n" || r.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("log key %q %v", r.Body, r.Header)
	}
	if k, err := c.LogKey(t.Context()); err != nil || k != le.key.VerifierKey {
		t.Fatalf("client LogKey %q, %v", k, err)
	}
	r = le.do("GET", "/v1/profile", "", nil)
	mustStatus(t, r, 200)
	if !bytes.Contains(r.Body, []byte("    "+le.key.VerifierKey+"\n")) ||
		r.Header.Get("Link") != `<http://relay.test/v1/log-key>; rel="https://agenttool.dev/rels/log-key"; type="text/plain"` ||
		r.Header.Get("Link-Template") != `"http://relay.test/v1/log/{project_id}/checkpoint";rel="https://agenttool.dev/rels/log-checkpoint";type="text/plain"` {
		t.Fatalf("profile %v", r.Header)
	}
}

// TestLogPublicAndFeedCapability: a public project's log is read without
// a token and cached publicly; a feed capability reads tiles and proofs
// but not the bundles (every repository's records), and stops with the
// capability.
func TestLogPublicAndFeedCapability(t *testing.T) {
	le := newLogEnv(t)
	pid, tok := le.newProjectVisible("public")
	a := le.newAgent(pid, tok)
	le.postN(t, a, "repo", 3)
	le.postN(t, a, "other", 2)
	le.integrate(t, pid)
	prefix := "/v1/log/" + pid + "/"
	r := le.do("GET", prefix+"tile/entries/000.p/5", "", nil)
	mustStatus(t, r, 200)
	if r.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Fatalf("Cache-Control %q", r.Header.Get("Cache-Control"))
	}
	rep, err := le.client(t, "").Log(pid, le.key.Verifier).Audit(t.Context(), nil, client.AuditOptions{})
	if err != nil || rep.Checked != 5 {
		t.Fatalf("anonymous audit %+v, %v", rep, err)
	}

	fr := le.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, fr, 201)
	feedURL := fr.json(t)["url"].(string)
	capability := strings.TrimSuffix(strings.TrimPrefix(feedURL[:strings.Index(feedURL, "?")], "http://relay.test/v1/feeds/"), ".atom")
	cprefix := "/v1/feeds/" + capability + "/log/"
	r = le.do("GET", cprefix+"checkpoint", "", nil)
	mustStatus(t, r, 200)
	if r.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Fatalf("headers %v", r.Header)
	}
	mustStatus(t, le.do("GET", cprefix+"tile/0/000.p/5", "", nil), 200)
	mustStatus(t, le.do("GET", cprefix+"proof/inclusion?received_seq=2", "", nil), 200)
	wantCode(t, le.do("GET", cprefix+"tile/entries/000.p/5", "", nil), 403, "log_entries_need_token")
	// The capability's records check against its log.
	fc := le.client(t, "")
	fl := fc.FeedLog(capability, pid, le.key.Verifier)
	cp, err := fl.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := range le.client(t, tok).Events(t.Context(), client.EventsQuery{RepositoryID: "repo"}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := fl.CheckRecord(t.Context(), cp, rec); err != nil {
			t.Fatal(err)
		}
	}
	feedID := fr.json(t)["feed_id"].(string)
	mustStatus(t, le.do("DELETE", "/v1/feeds/"+feedID, tok, nil), 204)
	wantCode(t, le.do("GET", cprefix+"checkpoint", "", nil), 404, "not_found")
}

// TestLogTamperedStore: records edited in the store after they were
// logged — one record's bytes, one receipt, one deleted row — are caught
// by the SDK's audit (entry bundles against the tree) and by a client
// checking the records it reads (inclusion), on the engine under test.
func TestLogTamperedStore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(le *logEnv, t *testing.T, pid string)
		audit  string
		read   bool // the events route still serves the tampered record
	}{
		{"record bytes", func(le *logEnv, t *testing.T, pid string) {
			recs, err := le.st.RecordsAfter(t.Context(), pid, 6, 1)
			if err != nil {
				t.Fatal(err)
			}
			c := bytes.Replace(recs[0].Event, []byte("step 6"), []byte("step X"), 1)
			le.exec(t, `UPDATE events SET canonical = ? WHERE project_id = ? AND received_seq = ?`, c, pid, 7)
		}, "entry 6 (received_seq 7) of bundle tile/entries/000.p/20 does not hash to the tree's leaf", true},
		{"receipt", func(le *logEnv, t *testing.T, pid string) {
			at := "2020-01-02T03:04:05.678Z"
			le.exec(t, `UPDATE events SET received_at = ? WHERE project_id = ? AND received_seq = ?`, at, pid, 12)
		}, "entry 11 (received_seq 12) of bundle tile/entries/000.p/20 does not hash to the tree's leaf", true},
		{"deleted row", func(le *logEnv, t *testing.T, pid string) {
			le.exec(t, `DELETE FROM events WHERE project_id = ? AND received_seq = ?`, pid, 15)
		}, "entry bundle tile/entries/000.p/20 holds 14 entries, want 20", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			le := newLogEnv(t)
			pid, tok := le.newProject("")
			a := le.newAgent(pid, tok)
			le.postN(t, a, "repo", 20)
			le.integrate(t, pid)
			c := le.client(t, tok)
			l := c.Log(pid, le.key.Verifier)
			rep, err := l.Audit(t.Context(), nil, client.AuditOptions{})
			if err != nil || rep.Checked != 20 {
				t.Fatalf("honest audit %+v, %v", rep, err)
			}
			tc.tamper(le, t, pid)
			_, err = l.Audit(t.Context(), rep.Checkpoint, client.AuditOptions{All: true})
			if err == nil || !strings.Contains(err.Error(), tc.audit) {
				t.Fatalf("audit after tampering: %v, want %q", err, tc.audit)
			}
			// A reader checking each record it reads.
			ic := c.NewInclusionChecker(le.key.Verifier)
			var failed error
			n := 0
			for rec, err := range c.Events(t.Context(), client.EventsQuery{RepositoryID: "repo", Limit: 200}) {
				if err != nil {
					t.Fatal(err)
				}
				n++
				if err := ic.Check(t.Context(), rec); err != nil && failed == nil {
					failed = err
				}
			}
			if tc.read && !errors.Is(failed, client.ErrNotIncluded) {
				t.Fatalf("reader: %v, want ErrNotIncluded", failed)
			}
			if !tc.read && (failed != nil || n != 19) {
				// A deleted row is not read at all: the reader sees the gap
				// in received_seq, and the audit the short bundle.
				t.Fatalf("reader after a deleted row: %d records, %v", n, failed)
			}
		})
	}
}
