package relay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gatom "github.com/mmcdole/gofeed/atom"

	"github.com/acrelay/acrelay/relay"
)

// capabilityEnv is a relay whose --public-url is its own test server, so
// that a feed reader can follow the links of its documents as given.
func capabilityEnv(t *testing.T, logs io.Writer) *env {
	t.Helper()
	st := openTestStore(t)
	srv := httptest.NewUnstartedServer(nil)
	public := "http://" + srv.Listener.Addr().String()
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: public,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv.Config.Handler = h.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, url: public}
}

// bare GETs u as a feed reader holding only the URL would: no
// Authorization, no cookie, nothing but what net/http adds.
func bare(t *testing.T, u string) resp {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// walkPage is one document of an RFC 5005 walk: its URL, its entries'
// ids, its links by rel.
type walkPage struct {
	URL   string            `json:"url"`
	IDs   []string          `json:"ids"`
	Links map[string]string `json:"links"`
	// Entries: what feedparser made of each entry (the walk's script).
	Entries []struct {
		Title, Author, Link, Content string
	} `json:"entries"`
}

// feedparserWalk is the independent reader: Debian's feedparser 6 walks
// from the capability URL through prev-archive links (RFC 5005 §4.2),
// fetching every document itself, and prints the pages newest first.
const feedparserWalk = `
import json, sys, feedparser
url, pages = sys.argv[1], []
while url and len(pages) < 10:
    d = feedparser.parse(url)
    if d.bozo or d.get("status") != 200:
        sys.exit("feedparser: %s status %s bozo %s" % (url, d.get("status"), d.get("bozo_exception")))
    links = {l["rel"]: l["href"] for l in d.feed.get("links", [])}
    entries = [{"title": e.get("title"), "author": e.get("author"), "link": e.get("link"),
                "content": (e.get("content") or [{}])[0].get("value")} for e in d.entries]
    pages.append({"url": url, "ids": [e.id for e in d.entries], "links": links, "entries": entries})
    url = links.get("prev-archive")
json.dump(pages, sys.stdout)
`

// TestFeedCapabilityArchiveWalk: a feed reader holding only a private
// repository's capability URL walks its 457 records, with gofeed and with
// feedparser: every link of every document is under the capability and
// answers 200 without headers, current/prev-archive/next-archive agree,
// each event comes exactly once and in receipt order, and archives cache
// as immutable (the newest one revalidated). The capability is never
// logged. After DELETE /v1/feeds/{feed_id} every page is 404.
func TestFeedCapabilityArchiveWalk(t *testing.T) {
	logs := &lockedBuffer{}
	e := capabilityEnv(t, logs)
	pid, tok := e.newProjectVisible("private")
	a := e.newAgent(pid, tok)
	var want []string
	for i := range 457 {
		ev := a.intent("repo", "n")
		mustStatus(t, e.post(a, ev), 201)
		want = append(want, ev.ID)
		if i%100 == 0 {
			mustStatus(t, e.post(a, a.intent("other-repo", "o")), 201)
		}
	}
	r := e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`))
	mustStatus(t, r, 201)
	m := r.json(t)
	feedID, capURL := m["feed_id"].(string), m["url"].(string)
	capability := strings.TrimSuffix(strings.TrimPrefix(capURL, e.url+"/v1/feeds/"), ".atom?repository_id=repo")
	under := e.url + "/v1/feeds/" + capability
	if capURL != under+".atom?repository_id=repo" {
		t.Fatalf("url %q", capURL)
	}
	archiveAt := func(k int) string { return under + "/archives/" + strconv.Itoa(k) + ".atom" }

	var pages []walkPage // oldest first
	visited := map[string]bool{}
	for u := capURL; u != ""; {
		r := bare(t, u)
		mustStatus(t, r, 200)
		visited[u] = true
		if got := r.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Fatalf("%s: Referrer-Policy %q", u, got)
		}
		if lt := r.Header.Get("Link-Template"); lt != "" {
			t.Fatalf("%s: Link-Template %q needs a bearer", u, lt)
		}
		f, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatalf("gofeed %s: %v", u, err)
		}
		p := walkPage{URL: u, Links: map[string]string{}}
		for _, l := range f.Links {
			if _, dup := p.Links[l.Rel]; dup {
				t.Fatalf("%s: two %q links", u, l.Rel)
			}
			p.Links[l.Rel] = l.Href
		}
		for _, it := range f.Entries {
			p.IDs = append(p.IDs, it.ID)
		}
		if bytes.Contains(r.Body, []byte("link-template")) {
			t.Fatalf("%s: the document links the wake stream, which needs a bearer", u)
		}
		// Every link of the document, and of its Link header but the
		// public profile, is under the capability and works without
		// headers.
		header := linkTargets(t, r.Header.Get("Link"))
		if d, ok := header["describedby"]; ok && d != e.url+"/v1/profile" {
			t.Fatalf("%s: describedby %q", u, d)
		}
		delete(header, "describedby")
		// The log's checkpoint (on the current document) is under the
		// capability too, but not a link of the Atom document.
		if c, ok := header["https://agenttool.dev/rels/log-checkpoint"]; ok && (!strings.HasPrefix(c, under) || !strings.HasSuffix(c, "/log/checkpoint")) {
			t.Fatalf("%s: log-checkpoint link %q", u, c)
		}
		delete(header, "https://agenttool.dev/rels/log-checkpoint")
		for rel, href := range header {
			if p.Links[rel] != href {
				t.Fatalf("%s: Link header %s=%q, document %q", u, rel, href, p.Links[rel])
			}
		}
		for rel, href := range p.Links {
			if !strings.HasPrefix(href, under) {
				t.Fatalf("%s: %s link %q is not under the capability", u, rel, href)
			}
			if !visited[href] {
				mustStatus(t, bare(t, href), 200)
				visited[href] = true
			}
		}
		if p.Links["self"] != u {
			t.Fatalf("%s: self %q", u, p.Links["self"])
		}
		pages = append([]walkPage{p}, pages...)
		u = p.Links["prev-archive"]
	}
	// 457 records: the current document holds archive 1's records and
	// the 57 after them (the overlap rule, currentPage), and links archive
	// 0; archive 1 is reached from archive 0's next-archive.
	if len(pages) != 2 {
		t.Fatalf("%d documents, want archive 0 and the current document", len(pages))
	}
	cur := pages[1]
	if cur.Links["alternate"] != under+".json?repository_id=repo" || cur.Links["prev-archive"] != archiveAt(0) ||
		cur.Links["hub"] != "" || len(cur.Links) != 3 || len(cur.IDs) != 257 {
		t.Fatalf("current document: %d entries, links %v", len(cur.IDs), cur.Links)
	}
	for k := range 2 {
		ar := bare(t, archiveAt(k))
		af, err := (&gatom.Parser{}).Parse(bytes.NewReader(ar.Body))
		if err != nil {
			t.Fatal(err)
		}
		p := walkPage{URL: archiveAt(k), Links: map[string]string{}}
		for _, l := range af.Links {
			p.Links[l.Rel] = l.Href
		}
		for _, it := range af.Entries {
			p.IDs = append(p.IDs, it.ID)
		}
		if !visited[archiveAt(k)] {
			t.Fatalf("archive %d is linked from no document of the walk", k)
		}
		wantLinks := map[string]string{"self": archiveAt(k), "current": capURL}
		if k > 0 {
			wantLinks["prev-archive"] = archiveAt(k - 1)
		}
		if k == 0 {
			wantLinks["next-archive"] = archiveAt(1) // archive 1 is the newest: no next-archive
		}
		if !equalMaps(p.Links, wantLinks) || len(p.IDs) != 200 || p.IDs[0] != want[200*k] {
			t.Fatalf("archive %d: %d entries, links %v, want %v", k, len(p.IDs), p.Links, wantLinks)
		}
		r := bare(t, archiveAt(k))
		cc := map[int]string{0: "private, max-age=31536000, immutable", 1: "private, no-cache"}[k]
		if got := r.Header.Get("Cache-Control"); got != cc {
			t.Fatalf("archive %d: Cache-Control %q, want %q", k, got, cc)
		}
		etag := r.Header.Get("ETag")
		if res := e.do("GET", strings.TrimPrefix(archiveAt(k), e.url), "", nil, "If-None-Match", etag); res.Status != 304 {
			t.Fatalf("archive %d with If-None-Match %s: %d", k, etag, res.Status)
		}
	}
	checkOrder := func(reader string, pages []walkPage) {
		t.Helper()
		var got []string
		for _, p := range pages {
			got = append(got, p.IDs...)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d events, want %d", reader, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: event %d is %s, want %s", reader, i, got[i], want[i])
			}
		}
	}
	checkOrder("gofeed", pages)

	// The JSON alternate pages under the capability too.
	j := bare(t, under+".json?repository_id=repo&limit=150")
	mustStatus(t, j, 200)
	visited[under+".json?repository_id=repo&limit=150"] = true
	var page struct {
		Events []struct {
			Event struct {
				EventID string `json:"event_id"`
			} `json:"event"`
		} `json:"events"`
	}
	if err := json.Unmarshal(j.Body, &page); err != nil || len(page.Events) != 150 || page.Events[149].Event.EventID != want[149] {
		t.Fatalf("JSON alternate: %d events, %v", len(page.Events), err)
	}
	links := linkTargets(t, j.Header.Get("Link"))
	// received_seq 152: the 150th record of repo, after one of other-repo.
	if links["next"] != under+".json?repository_id=repo&after=152&limit=150" || links["alternate"] != capURL ||
		links["self"] != under+".json?repository_id=repo" {
		t.Fatalf("JSON alternate links %v", links)
	}
	mustStatus(t, bare(t, links["next"]), 200)
	visited[links["next"]] = true

	t.Run("feedparser", func(t *testing.T) {
		if err := exec.Command("/usr/bin/python3", "-c", "import feedparser").Run(); err != nil {
			t.Skip("/usr/bin/python3 cannot import feedparser (Debian's python3-feedparser; scripts/provision_feedparser.sh installs it)")
		}
		script := filepath.Join(t.TempDir(), "walk.py")
		if err := os.WriteFile(script, []byte(feedparserWalk), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/usr/bin/python3", script, capURL)
		// No proxy between the reader and the loopback relay.
		cmd.Env = append(os.Environ(), "no_proxy=*", "NO_PROXY=*", "http_proxy=", "HTTP_PROXY=")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("feedparser walk: %v\n%s", err, stderr.String())
		}
		var fp []walkPage
		if err := json.Unmarshal(out, &fp); err != nil {
			t.Fatalf("feedparser output: %v\n%s", err, out)
		}
		for i, j := 0, len(fp)-1; i < j; i, j = i+1, j-1 {
			fp[i], fp[j] = fp[j], fp[i]
		}
		if len(fp) != len(pages) {
			t.Fatalf("feedparser read %d documents, gofeed %d", len(fp), len(pages))
		}
		for i := range fp {
			if fp[i].URL != pages[i].URL || !equalMaps(fp[i].Links, pages[i].Links) {
				t.Fatalf("feedparser document %d: %s %v; gofeed %s %v", i, fp[i].URL, fp[i].Links, pages[i].URL, pages[i].Links)
			}
		}
		checkOrder("feedparser", fp)
		// Each entry as a person sees it in a feedparser-based reader: the
		// kind and the summary, the sender's display name, the record's
		// own page under the capability, readable HTML.
		links := map[string]bool{}
		for _, p := range fp {
			for _, en := range p.Entries {
				if en.Title != "Intent: n" || en.Author != "agent" || !strings.HasPrefix(en.Link, under+"/records/") || links[en.Link] ||
					!strings.Contains(en.Content, "<strong>agent</strong>") {
					t.Fatalf("feedparser entry %+v", en)
				}
				links[en.Link] = true
			}
		}
		if len(links) != len(want) {
			t.Fatalf("feedparser saw %d distinct entry links, want %d", len(links), len(want))
		}
	})

	// Revocation ends every page at once.
	mustStatus(t, e.do("DELETE", "/v1/feeds/"+feedID, tok, nil), 204)
	if len(visited) != 6 { // 3 Atom documents, 3 JSON pages
		t.Fatalf("visited %d pages, want 6", len(visited))
	}
	for u := range visited {
		r := bare(t, u)
		if r.Status != 404 || r.code(t) != "not_found" {
			t.Fatalf("%s after revocation: %d %s", u, r.Status, r.Body)
		}
	}

	logs.mu.Lock()
	text := logs.b.String()
	logs.mu.Unlock()
	if strings.Contains(text, capability) || strings.Contains(text, capability[len(capability)-43:]) {
		t.Fatalf("a log line holds the capability:\n%s", text)
	}
	for _, route := range []string{"/v1/feeds/{feed_token}.atom", "/v1/feeds/{feed_token}/archives/{k:[0-9]+}.atom", "/v1/feeds/{feed_token}.json"} {
		if !strings.Contains(text, route) {
			t.Fatalf("no log line names %s:\n%s", route, text)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
