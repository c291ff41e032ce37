package matrix

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/storetest"
)

// record returns a record whose record-event content is exactly size
// bytes long (for publicURL).
func record(t *testing.T, publicURL string, size int) store.Record {
	t.Helper()
	r := store.Record{EventID: "sha256:" + strings.Repeat("ab", 32), RepositoryID: "repo-1", Kind: correspondence.KindProgress,
		ReceivedSeq: 42, ReceivedAt: time.Date(2026, 7, 19, 10, 0, 0, 0, time.UTC)}
	r.Event = []byte(`{"event_id":"` + r.EventID + `","pad":""}`)
	content, _ := recordContent(publicURL, r)
	pad := size - len(content)
	if pad < 0 {
		t.Fatalf("size %d below the smallest content %d", size, len(content))
	}
	r.Event = []byte(`{"event_id":"` + r.EventID + `","pad":"` + strings.Repeat("x", pad) + `"}`)
	return r
}

// TestRecordContentSize: a record whose content fits MaxContentBytes goes
// whole; one byte more and it goes as a reference (event id, kind,
// received_seq and the relay URL that serves exactly that record), which
// is small.
func TestRecordContentSize(t *testing.T) {
	const public = "https://relay.example"
	for _, tc := range []struct {
		name string
		size int
		full bool
	}{
		{"small", 500, true},
		{"at the limit", MaxContentBytes, true},
		{"one byte over", MaxContentBytes + 1, false},
		{"a whole PDU", 65536, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := record(t, public, tc.size)
			content, full := recordContent(public, r)
			if full != tc.full {
				t.Fatalf("full = %v for %d bytes, want %v", full, tc.size, tc.full)
			}
			if full {
				if len(content) != tc.size {
					t.Fatalf("content %d bytes, want %d", len(content), tc.size)
				}
				if got, ok := parseRecord(content); !ok || got.eventID != r.EventID || got.seq != 42 {
					t.Fatalf("parseRecord = %+v %v", got, ok)
				}
				return
			}
			if len(content) > 1024 {
				t.Errorf("reference is %d bytes", len(content))
			}
			var c struct {
				Reference Reference `json:"reference"`
				Relay     string    `json:"relay"`
			}
			if err := json.Unmarshal(content, &c); err != nil {
				t.Fatal(err)
			}
			ref := c.Reference
			if ref.EventID != r.EventID || ref.Kind != "progress" || ref.ReceivedSeq != "42" || ref.RepositoryID != "repo-1" || c.Relay != public {
				t.Errorf("reference %+v relay %q", ref, c.Relay)
			}
			u, err := url.Parse(ref.URL)
			if err != nil || !strings.HasPrefix(ref.URL, public+"/v1/correspondence/events?") {
				t.Fatalf("url %q", ref.URL)
			}
			if q := u.Query(); q.Get("after") != "41" || q.Get("limit") != "1" || q.Get("repository_id") != "repo-1" {
				t.Errorf("url %q does not select exactly received_seq 42", ref.URL)
			}
			if got, ok := parseRecord(content); !ok || got.eventID != r.EventID || got.seq != 42 {
				t.Errorf("parseRecord(reference) = %+v %v (reconciling must find references too)", got, ok)
			}
			n := noticeContent(r, content, full)
			if !strings.Contains(n["body"].(string), "too large") {
				t.Errorf("notice body %q does not say the record is at the relay", n["body"])
			}
		})
	}
}

// TestSummaryBounded: the notice's summary stays one short line however
// many and long the paths are, so the notice (summary and record) fits a
// PDU whenever the record does.
func TestSummaryBounded(t *testing.T) {
	var paths []string
	for i := range 64 {
		paths = append(paths, fmt.Sprintf("p%02d/%s", i, strings.Repeat("𝔸", 230)))
	}
	ev, raw := storetest.NewSigner(t, storetest.NewUUID()).Event(t, storetest.Spec{Paths: paths})
	s := Summary(store.Record{EventID: "sha256:" + strings.Repeat("ab", 32), Kind: ev.Kind, Event: raw, ReceivedSeq: 7}, true)
	if len(s) > 512 || !utf8.ValidString(s) || !strings.Contains(s, "p00/") || !strings.Contains(s, "…") {
		t.Errorf("summary of %d bytes: %.120q", len(s), s)
	}
}
