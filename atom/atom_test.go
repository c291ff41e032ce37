package atom_test

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acrelay/acrelay/atom"
)

var update = flag.Bool("update", false, "rewrite golden files")

func sampleFeed() atom.Feed {
	at := time.Date(2026, 7, 19, 10, 0, 3, 217e6, time.UTC)
	return atom.Feed{
		ID:      "http://relay.test/v1/correspondence/events?repository_id=repo",
		Title:   "agent-correspondence repo",
		Updated: at.Add(time.Second),
		Links: []atom.Link{
			{Rel: "self", Type: "application/atom+xml", Href: "http://relay.test/v1/correspondence/events.atom?repository_id=repo&after=1"},
			{Rel: "alternate", Type: "application/vnd.agenttool.correspondence+json", Href: "http://relay.test/v1/correspondence/events?repository_id=repo"},
		},
		LinkTemplate: &atom.LinkTemplate{Template: "http://relay.test/v1/wake/voice?identity_id={identity_id}&keys=correspondence", Rel: "https://agenttool.dev/rels/correspondence-live", Type: "text/event-stream"},
		Entries: []atom.Entry{
			{EventID: "sha256:" + strings.Repeat("a", 64), Kind: "intent", RepositoryID: "repo", ThreadID: "t<1>&", ReceivedAt: at,
				Record: []byte(`{"event":{"body":{"summary":"a < b && c > d \"q\" \u0001"}},"receipt":{"received_at":"2026-07-19T10:00:03.217Z","received_seq":"1"}}`)},
			{EventID: "sha256:" + strings.Repeat("b", 64), Kind: "progress", RepositoryID: "repo", ThreadID: "t", ReceivedAt: at.Add(time.Second),
				Record: []byte("{\"event\":{\"body\":{\"summary\":\"nonchar \uFFFE \uFFFF combining \u0301 astral \U0001F600 del \x7f\"}},\"receipt\":{\"received_at\":\"2026-07-19T10:00:04.217Z\",\"received_seq\":\"2\"}}")},
		},
	}
}

func TestGoldenFeed(t *testing.T) {
	got := atom.Render(sampleFeed())
	path := filepath.Join("testdata", "feed.atom")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./atom -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("feed bytes differ from %s\n got: %s", path, got)
	}
}

// TestEntryBytesImmutable: an entry's bytes depend only on its record, so
// they are identical in a feed before and after later appends.
func TestEntryBytesImmutable(t *testing.T) {
	f := sampleFeed()
	first := atom.EntryBytes(f.Entries[0])
	one := f
	one.Entries = f.Entries[:1]
	if !bytes.Contains(atom.Render(one), first) || !bytes.Contains(atom.Render(f), first) {
		t.Fatal("entry bytes changed when the feed grew")
	}
}

// TestWellFormedAndContentRoundTrips parses the feed with encoding/xml and
// checks each <at:record> decodes to JSON equal to the record, for strings
// the JSON profile admits but XML 1.0 cannot hold raw.
func TestWellFormedAndContentRoundTrips(t *testing.T) {
	f := sampleFeed()
	var doc struct {
		Entries []struct {
			ID      string `xml:"id"`
			Content string `xml:"https://agenttool.dev/ns/correspondence record"`
		} `xml:"entry"`
	}
	dec := xml.NewDecoder(bytes.NewReader(atom.Render(f)))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("trailing garbage: %v", err)
		}
	}
	if len(doc.Entries) != 2 {
		t.Fatalf("%d entries", len(doc.Entries))
	}
	want0 := string(f.Entries[0].Record)
	if doc.Entries[0].Content != want0 {
		t.Errorf("content 0 = %q, want %q", doc.Entries[0].Content, want0)
	}
	// U+FFFE/U+FFFF travel as JSON escapes: the same JSON value.
	want1 := strings.NewReplacer("\uFFFE", `\ufffe`, "\uFFFF", `\uffff`).Replace(string(f.Entries[1].Record))
	if doc.Entries[1].Content != want1 {
		t.Errorf("content 1 = %q, want %q", doc.Entries[1].Content, want1)
	}
}

// FuzzRenderWellFormed: whatever the record, kind, ids and author, the
// document is well-formed XML and each entry's decoded HTML content holds
// no markup but Description.HTML's own inert elements.
func FuzzRenderWellFormed(f *testing.F) {
	f.Add("intent", "repo", "summary", []byte(`{"a":"b"}`), "Ada")
	f.Add("x\uFFFE", "r\x01", "\uFFFF", []byte("{\"s\":\"\uFFFE\x7f\"}"), "<b>")
	f.Add("artifact.offer", "r<x>", "t", []byte(`{"event":{"kind":"artifact.offer","scope":{"paths":["<a href=x>"]},"body":{"summary":"</content><script>","artifact":{"kind":"git_patch","locator":"javascript:<i>"}}},"receipt":{"received_at":"x","received_seq":"1"}}`), "</name>")
	f.Fuzz(func(t *testing.T, kind, repo, thread string, record []byte, author string) {
		if !utf8Valid(kind, repo, thread, string(record), author) {
			t.Skip()
		}
		out := atom.Render(atom.Feed{ID: "urn:x", Title: repo, Entries: []atom.Entry{{EventID: "sha256:x", Kind: kind, RepositoryID: repo, ThreadID: thread, Record: record, Author: author, Link: "http://relay.test/r/" + thread}}})
		dec := xml.NewDecoder(bytes.NewReader(out))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not well-formed: %v\n%q", err, out)
			}
		}
		var doc struct {
			Entries []struct {
				Content string `xml:"content"`
			} `xml:"entry"`
		}
		if err := xml.Unmarshal(out, &doc); err != nil || len(doc.Entries) != 1 {
			t.Fatalf("entries: %v", err)
		}
		assertInertHTML(t, doc.Entries[0].Content)
	})
}

func utf8Valid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
