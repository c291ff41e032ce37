package atom_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/atom"
)

const (
	idA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	rev = "0123456789abcdef0123456789abcdef01234567"
)

// kindBodies is one body of every kind of spec §5, with the optional
// fields a person would want to see.
var kindBodies = []struct {
	kind    string
	body    map[string]any
	parents []string
	title   string
}{
	{"intent", map[string]any{"summary": "Fix the parser's error positions"}, nil, "Intent: Fix the parser's error positions"},
	{"progress", map[string]any{"summary": "Half of the fixtures pass\nnext: the rest"}, nil, "Progress: Half of the fixtures pass next: the rest"},
	{"observation", map[string]any{"summary": "CI is flaky on arm64"}, nil, "Observation: CI is flaky on arm64"},
	{"claim.open", map[string]any{"claim_id": "c1c1c1c1-0000-4000-8000-000000000001", "generation": 1, "expires_at": "2026-07-19T11:00:00.000Z"}, nil, "Claim: src/parser, docs until 2026-07-19T11:00:00.000Z"},
	{"claim.renew", map[string]any{"claim_id": "c1c1c1c1-0000-4000-8000-000000000001", "generation": 2, "predecessor_event_id": idA, "expires_at": "2026-07-19T12:00:00.000Z"}, []string{idA}, "Claim renewed: src/parser, docs until 2026-07-19T12:00:00.000Z"},
	{"claim.release", map[string]any{"claim_id": "c1c1c1c1-0000-4000-8000-000000000001", "generation": 3, "predecessor_event_id": idA, "detail": "done with the parser"}, []string{idA}, "Claim released: done with the parser"},
	{"artifact.offer", map[string]any{"artifact": map[string]any{"kind": "git_patch", "digest": "sha256:" + strings.Repeat("c", 64), "locator": "https://example.com/p.patch"}, "summary": "Patch for the parser"}, nil, "Artifact: Patch for the parser"},
	{"ack.seen", map[string]any{"target_event_id": idA}, []string{idA}, "Seen: on " + idA},
	{"ack.understood", map[string]any{"target_event_id": idA, "detail": "understood, starting"}, []string{idA}, "Understood: understood, starting"},
	{"ack.accepted", map[string]any{"target_event_id": idA}, []string{idA}, "Accepted: on " + idA},
	{"ack.rejected", map[string]any{"target_event_id": idA, "detail": "not this sprint"}, []string{idA}, "Rejected: not this sprint"},
	{"ack.applied", map[string]any{"target_event_id": idA, "result_revision": rev}, []string{idA}, "Applied: as " + rev},
	{"resume", map[string]any{"target_event_id": idA}, []string{idA}, "Resume: on " + idA},
	{"conflict.raise", map[string]any{"target_event_ids": []string{idA, idB}, "summary": "Both claim src/parser"}, []string{idA, idB}, "Conflict: Both claim src/parser"},
	{"conflict.resolve", map[string]any{"target_event_ids": []string{idA}, "summary": "Alice keeps src/parser", "result_revision": rev}, []string{idA}, "Conflict resolved: Alice keeps src/parser"},
	{"repair", map[string]any{"target_event_ids": []string{idB}, "summary": "Re-sent the lost handoff"}, []string{idB}, "Repair: Re-sent the lost handoff"},
	{"pause", map[string]any{"until": "2026-07-20T09:00:00.000Z"}, nil, "Pause: until 2026-07-20T09:00:00.000Z"},
	{"rest", map[string]any{}, nil, "Rest"},
	{"refusal", map[string]any{"target_event_id": idB, "detail": "out of scope"}, []string{idB}, "Refusal: out of scope"},
	{"handoff", map[string]any{"summary": "Parser work to Bob", "next_safe_action": "run make fixtures", "handoff_id": "d1d1d1d1-0000-4000-8000-000000000002"}, nil, "Handoff: Parser work to Bob"},
	{"close", map[string]any{"summary": "Parser done"}, nil, "Close: Parser done"},
}

// recordOf builds a record's {event, receipt} JSON (keys sorted, as
// encoding/json writes maps: deterministic, which is all a golden needs).
func recordOf(t testing.TB, seq int, kind, repo, thread string, paths, parents []string, body map[string]any) []byte {
	t.Helper()
	if parents == nil {
		parents = []string{}
	}
	at := time.Date(2026, 7, 19, 10, 0, seq, 0, time.UTC).Format(atom.TimeFormat)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // RFC 8785 escapes no markup character either
	err := enc.Encode(map[string]any{
		"event": map[string]any{
			"protocol": "agent-correspondence/v0.1", "event_id": "sha256:" + strings.Repeat(string(rune('0'+seq%10)), 64),
			"project_id": "11111111-1111-4111-8111-111111111111", "repository_id": repo, "thread_id": thread,
			"sender": map[string]any{"identity_id": "22222222-2222-4222-8222-222222222222", "signing_key_id": "33333333-3333-4333-8333-333333333333",
				"device_id": "44444444-4444-4444-8444-444444444444", "session_id": "55555555-5555-4555-8555-555555555555"},
			"kind": kind, "parents": parents, "session_seq": seq, "issued_at": at,
			"scope":     map[string]any{"base_revision": rev, "branch": "main", "paths": paths},
			"body":      body,
			"authority": map[string]any{"automatic_action": "never", "grants": []any{}},
			"signature": map[string]any{"algorithm": "Ed25519", "value_b64url": strings.Repeat("A", 86)},
		},
		"receipt": map[string]any{"received_at": at, "received_seq": strconv.Itoa(seq)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestGoldenEveryKind: one entry of every kind, its title the kind's label
// and the event's words, its author the display name, its content
// readable HTML, its <at:record> the exact record (golden:
// testdata/kinds.atom; go test ./atom -update rewrites it).
func TestGoldenEveryKind(t *testing.T) {
	f := atom.Feed{ID: "http://relay.test/v1/correspondence/events?project_id=11111111-1111-4111-8111-111111111111&repository_id=repo",
		Title: "agent-correspondence repo", Updated: time.Date(2026, 7, 19, 10, 1, 0, 0, time.UTC)}
	for i, k := range kindBodies {
		rec := recordOf(t, i+1, k.kind, "repo", "parser-errors", []string{"src/parser", "docs"}, k.parents, k.body)
		e := atom.Entry{EventID: "sha256:" + strings.Repeat(string(rune('0'+(i+1)%10)), 64), Kind: k.kind, RepositoryID: "repo", ThreadID: "parser-errors",
			ReceivedAt: time.Date(2026, 7, 19, 10, 0, i+1, 0, time.UTC), Record: rec, Author: "Alice the agent",
			Link: "http://relay.test/v1/feeds/acf_x/records/" + string(rune('0'+i%10))}
		if i == 2 {
			e.Author = "" // no display name: the identity id
		}
		f.Entries = append(f.Entries, e)
		d, ok := atom.Describe(k.kind, rec)
		if !ok || d.Title() != k.title {
			t.Errorf("%s: title %q, want %q", k.kind, d.Title(), k.title)
		}
	}
	got := atom.Render(f)
	path := filepath.Join("testdata", "kinds.atom")
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
	var doc struct {
		Entries []struct {
			Title   string `xml:"title"`
			Author  string `xml:"author>name"`
			Content struct {
				Type string `xml:"type,attr"`
				Text string `xml:",chardata"`
			} `xml:"content"`
			Link struct {
				Rel  string `xml:"rel,attr"`
				Type string `xml:"type,attr"`
				Href string `xml:"href,attr"`
			} `xml:"link"`
			Record string `xml:"https://agenttool.dev/ns/correspondence record"`
		} `xml:"entry"`
	}
	if err := xml.Unmarshal(got, &doc); err != nil {
		t.Fatal(err)
	}
	for i, e := range doc.Entries {
		if e.Title != kindBodies[i].title || e.Content.Type != "html" || e.Record != string(f.Entries[i].Record) ||
			e.Link.Rel != "alternate" || e.Link.Type != "text/html" || e.Link.Href != f.Entries[i].Link {
			t.Errorf("entry %d: %+v", i, e)
		}
		wantAuthor := "Alice the agent"
		if i == 2 {
			wantAuthor = "22222222-2222-4222-8222-222222222222"
		}
		if e.Author != wantAuthor || !strings.Contains(e.Content.Text, "<strong>"+wantAuthor+"</strong>") {
			t.Errorf("entry %d: author %q", i, e.Author)
		}
		assertInertHTML(t, e.Content.Text)
	}
	// What a person needs is in the content: paths, revisions, answered
	// events, a claim's expiry, an artifact's locator (as text).
	for _, want := range []string{"<code>src/parser</code>, <code>docs</code>", "<code>" + rev + "</code>", "Answers: <code>" + idA + "</code>, <code>" + idB + "</code>",
		"Claim expires: <code>2026-07-19T11:00:00.000Z</code>", "Artifact locator: <code>https://example.com/p.patch</code>", "Next safe action: run make fixtures"} {
		found := false
		for _, e := range doc.Entries {
			found = found || strings.Contains(e.Content.Text, want)
		}
		if !found {
			t.Errorf("no entry's content says %q", want)
		}
	}
}

// inertTags are the only elements Description.HTML writes: none links,
// loads or runs anything.
var inertTags = strings.NewReplacer("<p>", "", "</p>", "", "<strong>", "", "</strong>", "", "<br>", "",
	"<ul>", "", "</ul>", "", "<li>", "", "</li>", "", "<code>", "", "</code>", "")

// assertInertHTML fails unless html (a decoded content) holds no markup
// but inertTags: every agent-controlled '<' arrives as "&lt;".
func assertInertHTML(t *testing.T, html string) {
	t.Helper()
	if rest := inertTags.Replace(html); strings.ContainsAny(rest, "<>") {
		t.Errorf("content holds live markup: %q", rest)
	}
}

// hostile is markup in every agent-controlled string: summary, ids, paths,
// locator, display name.
var hostile = []string{
	`<script>alert(1)</script>`,
	`</title><script>alert(2)</script>`,
	`<a href="javascript:alert(3)">x</a>`,
	`&lt;script&gt;alert(4)&lt;/script&gt; &amp;lt; &#60;b&#62;`,
	`]]></content><content type="xhtml">`,
	`<img src=x onerror=alert(5)>`,
}

// TestHostileTextEscaped: markup in the summary, repository and thread
// ids, paths, artifact locator and display name is text in the title, the
// author and the HTML content: the document is well-formed, and the
// decoded content has no element but the inert ones.
func TestHostileTextEscaped(t *testing.T) {
	var f atom.Feed
	f.ID, f.Title = "urn:x", hostile[0]
	for i, h := range hostile {
		body := map[string]any{"artifact": map[string]any{"kind": "content_digest", "digest": "sha256:" + strings.Repeat("d", 64), "locator": "javascript:" + h}, "summary": h}
		rec := recordOf(t, i+1, "artifact.offer", "repo"+h, "t"+h, []string{"p" + h}, nil, body)
		f.Entries = append(f.Entries, atom.Entry{EventID: "sha256:x" + h, Kind: "artifact.offer", RepositoryID: "repo" + h, ThreadID: "t" + h,
			Record: rec, Author: h, Link: "http://relay.test/r/" + h})
	}
	out := atom.Render(f)
	var doc struct {
		Entries []struct {
			Title   string `xml:"title"`
			Author  string `xml:"author>name"`
			Content string `xml:"content"`
			Link    struct {
				Href string `xml:"href,attr"`
			} `xml:"link"`
		} `xml:"entry"`
	}
	if err := xml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	if len(doc.Entries) != len(hostile) {
		t.Fatalf("%d entries", len(doc.Entries))
	}
	for i, e := range doc.Entries {
		h := hostile[i]
		if e.Title != "Artifact: "+h || e.Author != h || e.Link.Href != "http://relay.test/r/"+h {
			t.Errorf("entry %d: title %q author %q link %q", i, e.Title, e.Author, e.Link.Href)
		}
		assertInertHTML(t, e.Content)
		for _, s := range []string{"repo" + h, "t" + h, "p" + h, "javascript:" + h} {
			if !strings.Contains(e.Content, escapeHTML(s)) {
				t.Errorf("entry %d: content lacks %q escaped", i, s)
			}
		}
	}
}

func escapeHTML(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

// FuzzDescribe: whatever a record holds, its title is one line (no
// control or line break) of at most the label, ": " and TitleMax+1
// scalar values, and its HTML has no markup but the inert elements.
func FuzzDescribe(f *testing.F) {
	f.Add("progress", []byte(`{"event":{"kind":"progress","body":{"summary":"a\nb\tc"}},"receipt":{"received_seq":"1"}}`), "x")
	f.Add("claim.open", []byte(`{"event":{"kind":"claim.open","scope":{"paths":["<p>"]},"body":{"claim_id":"c","expires_at":"t"}}}`), "<i>")
	f.Fuzz(func(t *testing.T, kind string, record []byte, author string) {
		d, _ := atom.Describe(kind, record)
		title := d.Title()
		if strings.ContainsAny(title, "\n\r\t\x00") {
			t.Fatalf("title %q is not one line", title)
		}
		if n := len([]rune(title)); n > len([]rune(d.Label))+2+atom.TitleMax+1 {
			t.Fatalf("title of %d scalars: %q", n, title)
		}
		assertInertHTML(t, d.HTML(author))
	})
}
