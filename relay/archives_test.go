package relay_test

import (
	"bytes"
	"strings"
	"testing"

	gatom "github.com/mmcdole/gofeed/atom"
)

// TestArchiveLinksOnlyExistingDocuments: RFC 5005 §4 — the newest archive
// links to current and has no next-archive until the next archive is
// complete (it is revalidated, not immutable, until then); an older one
// links its successor and is immutable. At exactly 200·k records the
// current document holds archive k-1's records (the overlap rule), says
// the newest record's time, and links archive k-2.
func TestArchiveLinksOnlyExistingDocuments(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProjectVisible("public")
	a := e.newAgent(pid, tok)
	post := func(n int) {
		for range n {
			mustStatus(t, e.post(a, a.intent("repo", "n")), 201)
		}
	}
	const base = "http://relay.test"
	sel := "?project_id=" + pid + "&repository_id=repo"
	archive := func(k string) string { return "/v1/correspondence/archives/" + k + ".atom" + sel }
	current := "/v1/correspondence/events.atom" + sel
	get := func(path string) (resp, *gatom.Feed) {
		t.Helper()
		r := e.do("GET", path, "", nil)
		mustStatus(t, r, 200)
		f, err := (&gatom.Parser{}).Parse(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		return r, f
	}
	wantArchive := func(k, cc, next string) {
		t.Helper()
		r, f := get(archive(k))
		if got := r.Header.Get("Cache-Control"); got != cc {
			t.Fatalf("archive %s: Cache-Control %q, want %q", k, got, cc)
		}
		if got := linkOf(f, "next-archive"); got != next {
			t.Fatalf("archive %s: next-archive %q, want %q", k, got, next)
		}
		if got := linkOf(f, "current"); got != base+current {
			t.Fatalf("archive %s: current %q", k, got)
		}
		if next != "" {
			mustStatus(t, e.do("GET", strings.TrimPrefix(next, base), "", nil), 200)
		}
		if h := r.Header.Get("Link"); strings.Contains(h, "next-archive") != (next != "") {
			t.Fatalf("archive %s: Link %q", k, h)
		}
	}

	post(400)
	wantArchive("0", "public, max-age=31536000, immutable", base+archive("1"))
	wantArchive("1", "public, no-cache", "")
	wantCode(t, e.do("GET", archive("2"), "", nil), 404, "not_found")

	// 400 records: the current document holds archive 1's 200 records,
	// and its <updated> is the newest record's received_at.
	_, a1 := get(archive("1"))
	newest := a1.Entries[len(a1.Entries)-1].Updated
	cur, f := get(current)
	if len(f.Entries) != 200 || f.Entries[0].ID != a1.Entries[0].ID || f.Updated != newest || !bytes.Contains(cur.Body, []byte("<updated>"+newest+"</updated>")) {
		t.Fatalf("current document: %d entries, updated %q, want 200 and %q", len(f.Entries), f.Updated, newest)
	}
	if got := linkOf(f, "prev-archive"); got != base+archive("0") {
		t.Fatalf("current prev-archive %q", got)
	}

	post(200)
	wantArchive("1", "public, max-age=31536000, immutable", base+archive("2"))
	wantArchive("2", "public, no-cache", "")
}
