package atom_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/acrelay/acrelay/atom"
)

// TestGoldenTopicAndArchive: a topic's current document (WebSub hub and
// self links, RFC 5005 prev-archive) and an archive document
// (<fh:archive/>, prev-archive, next-archive, current); a feed
// capability's empty current document (every link under the capability,
// no hub or wake template, <updated> the newest record's time) and its
// newest archive (current, no next-archive: RFC 5005 §4 links only
// documents that exist).
func TestGoldenTopicAndArchive(t *testing.T) {
	const topic = "http://relay.test/v1/correspondence/events.atom?project_id=11111111-1111-4111-8111-111111111111&repository_id=repo"
	const archives = "http://relay.test/v1/correspondence/archives/"
	const sel = "?project_id=11111111-1111-4111-8111-111111111111&repository_id=repo"
	current := sampleFeed()
	current.Links = append([]atom.Link{
		{Rel: "hub", Href: "http://relay.test/websub/hub"},
		{Rel: "self", Type: "application/atom+xml", Href: topic},
	}, current.Links[1:]...)
	current.Links = append(current.Links, atom.Link{Rel: "prev-archive", Type: "application/atom+xml", Href: archives + "1.atom" + sel})

	archive := sampleFeed()
	archive.ID = archives + "2.atom" + sel
	archive.Archive = true
	archive.Links = []atom.Link{
		{Rel: "self", Type: "application/atom+xml", Href: archives + "2.atom" + sel},
		{Rel: "current", Type: "application/atom+xml", Href: topic},
		{Rel: "prev-archive", Type: "application/atom+xml", Href: archives + "1.atom" + sel},
		{Rel: "next-archive", Type: "application/atom+xml", Href: archives + "3.atom" + sel},
	}
	archive.LinkTemplate = nil

	const capability = "http://relay.test/v1/feeds/acf_aaaaaaaaaaaaaaaaaaaaaaaaaa_0123456789abcdefghijklmnopqrstuvwxyzABCDEFG"
	capCurrent := sampleFeed()
	capCurrent.ID = "http://relay.test/v1/correspondence/events?project_id=11111111-1111-4111-8111-111111111111&repository_id=repo"
	capCurrent.Updated = capCurrent.Entries[1].ReceivedAt
	capCurrent.Entries = nil
	capCurrent.LinkTemplate = nil
	capCurrent.Links = []atom.Link{
		{Rel: "self", Type: "application/atom+xml", Href: capability + ".atom?repository_id=repo"},
		{Rel: "alternate", Type: "application/vnd.agenttool.correspondence+json", Href: capability + ".json?repository_id=repo"},
		{Rel: "prev-archive", Type: "application/atom+xml", Href: capability + "/archives/1.atom"},
	}

	capArchive := sampleFeed()
	capArchive.ID = archives + "1.atom" + sel
	capArchive.Archive = true
	capArchive.LinkTemplate = nil
	capArchive.Links = []atom.Link{
		{Rel: "self", Type: "application/atom+xml", Href: capability + "/archives/1.atom"},
		{Rel: "current", Type: "application/atom+xml", Href: capability + ".atom?repository_id=repo"},
		{Rel: "prev-archive", Type: "application/atom+xml", Href: capability + "/archives/0.atom"},
	}

	for _, tc := range []struct {
		name string
		feed atom.Feed
	}{
		{"topic", current},
		{"archive", archive},
		{"capability-current", capCurrent},
		{"capability-archive-newest", capArchive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := atom.Render(tc.feed)
			path := filepath.Join("testdata", tc.name+".atom")
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
		})
	}
}
