package relay_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mmcdole/gofeed"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/shareddir"
)

// hostileSummaries are strings the JSON profile admits that XML 1.0 cannot
// hold raw or that tempt an escaper into mistakes.
var hostileSummaries = []string{
	"controls \u0001\u0008\u000b\u000c\u001f and tab\tnewline\ncr\r",
	"noncharacters \uFFFE \uFFFF \uFDD0 \U0001FFFE \U0010FFFF",
	"\u0301 lone combining mark first",
	"markup <entry>&amp;</content> ]]> \"quotes\" 'apos'",
	"del \u007f c1 \u0085 bom \uFEFF ls \u2028",
}

func entryRE(id string) *regexp.Regexp {
	return regexp.MustCompile(`(?s)  <entry>\n    <id>` + regexp.QuoteMeta(id) + `</id>.*?</entry>\n`)
}

func TestAtomFeedReadersAndSchema(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	var evs []*correspondence.Event
	for _, s := range hostileSummaries {
		ev := a.event("repo", "t", correspondence.KindProgress, obj("summary", s), nil)
		mustStatus(t, e.post(a, ev), 201)
		evs = append(evs, ev)
	}
	open := a.event("repo", "t", correspondence.KindClaimOpen, obj("claim_id", newUUID(), "generation", 1, "expires_at", "2999-01-01T00:00:00.000Z"), nil, "docs")
	mustStatus(t, e.post(a, open), 201)

	feed := e.do("GET", "/v1/correspondence/events.atom?repository_id=repo", tok, nil)
	mustStatus(t, feed, 200)
	if ct := feed.Header.Get("Content-Type"); ct != "application/atom+xml; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
	jsonPage := e.do("GET", "/v1/correspondence/events?repository_id=repo", tok, nil)
	records := jsonPage.json(t)["events"].([]any)

	t.Run("gofeed round-trips every entry's JSON exactly", func(t *testing.T) {
		parsed, err := gofeed.NewParser().ParseString(string(feed.Body))
		if err != nil {
			t.Fatalf("gofeed: %v", err)
		}
		if len(parsed.Items) != len(records) {
			t.Fatalf("%d items, want %d", len(parsed.Items), len(records))
		}
		for i, item := range parsed.Items {
			rec := records[i].(map[string]any)
			ev := rec["event"].(map[string]any)
			if item.GUID != ev["event_id"] {
				t.Errorf("item %d id %q, want %v", i, item.GUID, ev["event_id"])
			}
			got, err := canonicaljson.CanonicalizeBytes([]byte(itemRecord(item)))
			if err != nil {
				t.Fatalf("item %d record is not profile JSON: %v\n%q", i, err, itemRecord(item))
			}
			want, err := canonicaljson.CanonicalizeBytes([]byte(mustJSON(t, map[string]any{"event": ev, "receipt": rec["receipt"]})))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("item %d record differs\n got %s\nwant %s", i, got, want)
			}
			if item.Updated != rec["receipt"].(map[string]any)["received_at"] {
				t.Errorf("item %d updated %q", i, item.Updated)
			}
		}
		// The hostile summaries survive exactly.
		for i, s := range hostileSummaries {
			v, _ := canonicaljson.Parse([]byte(itemRecord(parsed.Items[i])))
			ev, _ := v.Get("event")
			body, _ := ev.Get("body")
			sum, _ := body.Get("summary")
			if sum.Str != s {
				t.Errorf("summary %d = %q, want %q", i, sum.Str, s)
			}
		}
	})

	t.Run("jing validates against RFC 4287 RELAX NG", func(t *testing.T) {
		rnc := shareddir.Path(t, "corpora", "atom", "atom.rnc")
		jing, err := exec.LookPath("jing")
		if err != nil {
			t.Skip("jing not installed (scripts/test.sh installs Debian's jing when it can)")
		}
		dir := t.TempDir()
		feedPath := filepath.Join(dir, "feed.xml")
		if err := os.WriteFile(feedPath, feed.Body, 0o644); err != nil {
			t.Fatal(err)
		}
		// A known-valid sample proves jing and the schema work at all.
		sample := shareddir.Path(t, "corpora", "atom", "samples", "valid-minimal-feed.xml")
		if out, err := exec.Command(jing, "-c", rnc, sample).Output(); err != nil {
			t.Fatalf("jing rejects the known-valid sample: %v %s", err, out)
		}
		out, err := exec.Command(jing, "-c", rnc, feedPath).Output()
		if err != nil {
			t.Fatalf("jing: %v\n%s", err, out)
		}
	})

	t.Run("entry bytes never change after later appends and lineage changes", func(t *testing.T) {
		before := entryRE(evs[0].ID).Find(feed.Body)
		openEntry := entryRE(open.ID).Find(feed.Body)
		if before == nil || openEntry == nil {
			t.Fatal("entries not found")
		}
		claimID, _ := open.Body.Get("claim_id")
		renew := a.event("repo", "t", correspondence.KindClaimRenew, obj("claim_id", claimID.Str, "generation", 2,
			"predecessor_event_id", open.ID, "expires_at", "2999-01-02T00:00:00.000Z"), []string{open.ID}, "docs")
		mustStatus(t, e.post(a, renew), 201)
		mustStatus(t, e.post(a, a.intent("repo", "later")), 201)
		after := e.do("GET", "/v1/correspondence/events.atom?repository_id=repo", tok, nil)
		if got := entryRE(evs[0].ID).Find(after.Body); !bytes.Equal(got, before) {
			t.Errorf("entry changed:\n%s\n%s", before, got)
		}
		if got := entryRE(open.ID).Find(after.Body); !bytes.Equal(got, openEntry) {
			t.Errorf("claim entry changed after its lineage changed")
		}
		if bytes.Equal(after.Body, feed.Body) || strings.Count(string(after.Body), "<entry>") != len(evs)+3 {
			t.Errorf("feed did not grow")
		}
	})
}

// itemRecord is the exact record JSON of a gofeed item: its
// <at:record> (atom.EntryBytes).
func itemRecord(item *gofeed.Item) string {
	for _, x := range item.Extensions["at"]["record"] {
		return x.Value
	}
	return ""
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	s, err := jsonEncode(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
