package relay_test

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/acrelay/acrelay/correspondence"
)

// gzipSeen is an http.RoundTripper that notes which entry bundles came
// gzipped (Go's transport asks for gzip and decompresses, marking the
// response Uncompressed).
type gzipSeen struct {
	mu      sync.Mutex
	bundles map[string]bool // path → gzipped
}

func (g *gzipSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && strings.Contains(r.URL.Path, "/tile/entries/") {
		g.mu.Lock()
		g.bundles[r.URL.Path[strings.Index(r.URL.Path, "/tile/"):]] = resp.Uncompressed
		g.mu.Unlock()
	}
	return resp, err
}

// bigIntent is an intent whose scope holds 4-byte characters up to about
// target bytes of event JSON (the schema allows 64 paths of 256
// characters).
func bigIntent(t *testing.T, a *agent, target int) *correspondence.Event {
	t.Helper()
	var paths []string
	size := func() int {
		return len(eventJSON(t, a.event("repo", "thread-1", correspondence.KindIntent, obj("summary", "big"), nil, paths...)))
	}
	for i := 0; size() < target-1100; i++ {
		paths = append(paths, fmt.Sprintf("p%02d", i)+strings.Repeat("😀", 253))
	}
	for last := ""; size() < target; {
		last += "😀"
		if len(paths) > 0 && strings.HasPrefix(paths[len(paths)-1], "z") {
			paths[len(paths)-1] = "z" + last
		} else {
			paths = append(paths, "z"+last)
		}
	}
	return a.event("repo", "thread-1", correspondence.KindIntent, obj("summary", "big"), nil, paths...)
}

// TestLogTorchwoodClient: torchwood's tile client (filippo.io/torchwood
// v0.6.1, the tlog client of litewitness's author) reads a public
// project's whole log through the C2SP routes — full and partial entry
// bundles, gzipped on the wire, one holding a record of more than 65,000
// bytes — and checks every entry against the tiles and the checkpoint's
// root; an empty project's size-0 checkpoint parses and verifies, with the
// empty tree's root.
func TestLogTorchwoodClient(t *testing.T) {
	le := newLogEnv(t)
	pid, tok := le.newProjectVisible("public")
	a := le.newAgent(pid, tok)
	le.postN(t, a, "repo", 200)
	mustStatus(t, le.post(a, bigIntent(t, a, 65_400)), 201)
	le.postN(t, a, "repo", 99)
	head := le.integrate(t, pid)
	if head.Size != 300 {
		t.Fatalf("size %d", head.Size)
	}
	r := le.do("GET", "/v1/log/"+pid+"/checkpoint", "", nil)
	mustStatus(t, r, 200)
	n, err := note.Open(r.Body, note.VerifierList(le.key.Verifier))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil || cp.N != 300 || cp.Hash != head.Root {
		t.Fatalf("torchwood checkpoint %+v, %v", cp, err)
	}
	seen := &gzipSeen{bundles: map[string]bool{}}
	f, err := torchwood.NewTileFetcher(le.url+"/v1/log/"+pid+"/", torchwood.WithHTTPClient(&http.Client{Transport: seen}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := torchwood.NewClient(f)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := le.st.RecordsAfter(t.Context(), pid, 0, 300)
	if err != nil {
		t.Fatal(err)
	}
	var count int64
	biggest := 0
	// Entries stops before a trailing partial bundle; resuming with the
	// same tree reads it (torchwood's documented use).
	for round := 0; count < 300 && round < 3; round++ {
		for i, entry := range c.Entries(t.Context(), cp.Tree, count) {
			if i != count || string(entry) != string(recs[i].ImmutableJSON()) {
				t.Fatalf("entry %d (#%d) is not record %d's bytes", i, count, i+1)
			}
			biggest = max(biggest, len(entry))
			count++
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Err(); err != nil || count != 300 {
		t.Fatalf("torchwood read %d entries: %v", count, err)
	}
	if biggest < 65_000 || biggest > 65_535 {
		t.Fatalf("the largest record is %d bytes, want 65,000–65,535", biggest)
	}
	if len(seen.bundles) != 2 || !seen.bundles["/tile/entries/000"] || !seen.bundles["/tile/entries/001.p/44"] {
		t.Fatalf("bundles read (gzipped): %v", seen.bundles)
	}

	// An empty project: its size-0 checkpoint.
	empty, _ := le.newProjectVisible("public")
	r = le.do("GET", "/v1/log/"+empty+"/checkpoint", "", nil)
	mustStatus(t, r, 200)
	n, err = note.Open(r.Body, note.VerifierList(le.key.Verifier))
	if err != nil {
		t.Fatal(err)
	}
	cp, err = torchwood.ParseCheckpoint(n.Text)
	if err != nil || cp.N != 0 || cp.Hash != tlog.Hash(sha256.Sum256(nil)) || cp.Origin != "relay.test/"+empty {
		t.Fatalf("empty log's checkpoint %q: %+v, %v", n.Text, cp, err)
	}
	for range c.Entries(t.Context(), cp.Tree, 0) {
		t.Fatal("an entry in the empty tree")
	}
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
}
