package relay

import (
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/atom"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// ArchivePath is the route of RFC 5005 archive documents:
// {public}/v1/correspondence/archives/{k}.atom?project_id=P&repository_id=R[&thread_id=T],
// parameters in the topic's canonical order. Archive k (0, 1, …) holds the
// selection's records at positions [200k, 200k+200) in receipt order; only
// complete archives exist (404 otherwise).
const ArchivePath = "/v1/correspondence/archives/"

// archiveCacheControl: an archive's bytes never change (RFC 8246 immutable).
const archiveCacheControl = "max-age=31536000, immutable"

// eventsRead is one validated read of a selection's records.
type eventsRead struct {
	sel      store.Selection
	after    int64
	afterStr *string // nil when the request had no after
	limit    int
	limitStr string // "" when the request had no limit
	media    string
	// topic: a topic route (or a feed capability's GET): hub and self
	// links (spec/websub.md "Topics"); without after, the Atom topic is
	// RFC 5005's current document.
	topic bool
}

func topicOf(sel store.Selection, media string) hub.Topic {
	t := hub.Topic{ProjectID: sel.ProjectID, RepositoryID: sel.RepositoryID, ThreadID: sel.ThreadID, Format: hub.FormatJSON}
	if media == mediaAtom {
		t.Format = hub.FormatAtom
	}
	return t
}

// archiveURL is archive k's URL: the topic's query, in its canonical
// encoding, on the archive path.
func archiveURL(base string, sel store.Selection, k int64) string {
	_, query, _ := strings.Cut(topicOf(sel, mediaAtom).URL(""), "?")
	return base + ArchivePath + strconv.FormatInt(k, 10) + ".atom?" + query
}

// currentPage reads the Atom topic's current document (RFC 5005 §3): the
// records after the newest complete archive (fewer than 200, so without a
// limit one document holds them all) and that archive's number, -1 when
// there is none.
func (s *Server) currentPage(r *http.Request, in eventsRead) (store.EventPage, int64, error) {
	n, err := s.st.CountRecords(r.Context(), in.sel)
	if err != nil {
		return store.EventPage{}, 0, err
	}
	archives := n / store.ArchiveSize
	limit := in.limit
	if in.limitStr == "" {
		limit = store.ArchiveSize
	}
	recs, err := s.st.RecordsAt(r.Context(), in.sel, archives*store.ArchiveSize, limit+1)
	if err != nil {
		return store.EventPage{}, 0, err
	}
	page := store.EventPage{Records: recs}
	if len(recs) > limit {
		page.Records, page.HasMore = recs[:limit], true
	}
	return page, archives - 1, nil
}

// serveEvents ends a read of records with the page in in.media.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, in eventsRead) {
	repo, thread := in.sel.RepositoryID, in.sel.ThreadID
	var page store.EventPage
	newestArchive := int64(-1)
	var err error
	if in.topic && in.media == mediaAtom && in.afterStr == nil {
		page, newestArchive, err = s.currentPage(r, in)
	} else {
		page, err = s.st.Events(r.Context(), store.EventQuery{ProjectID: in.sel.ProjectID, RepositoryID: repo, ThreadID: thread, After: in.after, Limit: in.limit})
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	base := s.publicBase(r)
	sel := selectionQuery(in.sel)
	jsonURL := base + "/v1/correspondence/events?" + sel
	atomURL := base + "/v1/correspondence/events.atom?" + sel
	self := selfURL(r, base)
	var hubURL string
	if in.topic {
		// The one self of a topic is its canonical URL, byte for byte what
		// the hub computes (hub.Topic.URL), whatever the request's query.
		self = topicOf(in.sel, in.media).URL(base)
		hubURL = base + hub.HubPath
	}
	nextAfter := in.afterStr
	if n := len(page.Records); n > 0 {
		v := strconv.FormatInt(page.Records[n-1].ReceivedSeq, 10)
		nextAfter = &v
	}
	ls := linkSet{self: self, selfType: in.media, hub: hubURL}
	if page.HasMore && nextAfter != nil {
		nq := url.Values{}
		nq.Set("after", *nextAfter)
		if in.limitStr != "" {
			nq.Set("limit", in.limitStr)
		}
		if in.topic {
			ls.next = self + "&" + nq.Encode()
		} else {
			nq.Set("project_id", in.sel.ProjectID)
			nq.Set("repository_id", repo)
			if thread != "" {
				nq.Set("thread_id", thread)
			}
			ls.next = base + r.URL.Path + "?" + nq.Encode()
		}
	}
	if in.media == mediaAtom {
		ls.alternate, ls.alternateType = jsonURL, mediaVendorJSON
	} else {
		ls.alternate, ls.alternateType = atomURL, mediaAtom
	}
	s.setCorrespondenceHeaders(w, r, in.sel, ls)

	var body []byte
	if in.media == mediaAtom {
		f := s.atomFeed(r, page, repo, thread, self, jsonURL, ls.next)
		if hubURL != "" {
			f.Links = append([]atom.Link{{Rel: "hub", Href: hubURL}}, f.Links...)
		}
		if newestArchive >= 0 {
			f.Links = append(f.Links, atom.Link{Rel: "prev-archive", Type: mediaAtom, Href: archiveURL(base, in.sel, newestArchive)})
		}
		body = atom.Render(f)
	} else {
		out := wire.Events{Protocol: correspondence.Protocol, Scope: "project_private", Events: make([]wire.Record, 0, len(page.Records)),
			Page: wire.Page{After: in.afterStr, NextAfter: nextAfter, HasMore: page.HasMore}}
		for _, rec := range page.Records {
			out.Events = append(out.Events, recordOf(rec))
		}
		body, err = marshalJSON(out)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.writeRepresentation(w, r, in.media, body)
}

func (s *Server) atomFeed(r *http.Request, page store.EventPage, repo, thread, self, jsonURL, next string) atom.Feed {
	f := atom.Feed{
		ID:      jsonURL,
		Title:   "agent-correspondence " + repo,
		Updated: time.Unix(0, 0).UTC(),
		Links: []atom.Link{
			{Rel: "self", Type: mediaAtom, Href: self},
			{Rel: "alternate", Type: mediaVendorJSON, Href: jsonURL},
		},
		LinkTemplate: &atom.LinkTemplate{Template: s.wakeTemplate(r), Rel: relLive, Type: "text/event-stream"},
	}
	if thread != "" {
		f.Title += " / " + thread
	}
	if next != "" {
		f.Links = append(f.Links, atom.Link{Rel: "next", Type: mediaAtom, Href: next})
	}
	addEntries(&f, page.Records)
	return f
}

func addEntries(f *atom.Feed, recs []store.Record) {
	for _, rec := range recs {
		f.Entries = append(f.Entries, atom.Entry{
			EventID: rec.EventID, Kind: string(rec.Kind), RepositoryID: rec.RepositoryID, ThreadID: rec.ThreadID,
			ReceivedAt: rec.ReceivedAt, Record: RecordJSON(rec),
		})
		if rec.ReceivedAt.After(f.Updated) {
			f.Updated = rec.ReceivedAt
		}
	}
}

// handleArchive: GET /v1/correspondence/archives/{k}.atom (RFC 5005 §4),
// with the topic's auth: a read token of the project, or none for a public
// project named by project_id. 200 with immutable bytes, or 404 for an
// archive that is not complete (yet).
func (s *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	pid, public, err := s.readProject(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "project_id", "repository_id", "thread_id")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	repo, thread, err := repoSelection(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k, ok := parseSeq(mux.Vars(r)["k"])
	if !ok || k > math.MaxInt64/store.ArchiveSize-1 {
		s.writeError(w, r, errNotFound)
		return
	}
	sel := store.Selection{ProjectID: pid, RepositoryID: repo, ThreadID: thread}
	recs, err := s.st.RecordsAt(r.Context(), sel, k*store.ArchiveSize, store.ArchiveSize)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(recs) < store.ArchiveSize {
		s.writeError(w, r, errNotFound)
		return
	}
	if !public {
		public = s.isPublic(r, pid)
	}
	base := s.publicBase(r)
	self := archiveURL(base, sel, k)
	current := topicOf(sel, mediaAtom).URL(base)
	f := atom.Feed{
		ID:      self,
		Title:   "agent-correspondence " + repo,
		Updated: time.Unix(0, 0).UTC(),
		Archive: true,
		Links: []atom.Link{
			{Rel: "self", Type: mediaAtom, Href: self},
			{Rel: "current", Type: mediaAtom, Href: current},
		},
	}
	if thread != "" {
		f.Title += " / " + thread
	}
	if k > 0 {
		f.Links = append(f.Links, atom.Link{Rel: "prev-archive", Type: mediaAtom, Href: archiveURL(base, sel, k-1)})
	}
	// Always linked, so the bytes never change: archive k+1 is 404 until
	// the selection has filled it; until then its records are in current.
	f.Links = append(f.Links, atom.Link{Rel: "next-archive", Type: mediaAtom, Href: archiveURL(base, sel, k+1)})
	f.Title += " (archive " + strconv.FormatInt(k, 10) + ")"
	addEntries(&f, recs)

	h := w.Header()
	var links []string
	for _, l := range f.Links {
		links = append(links, "<"+l.Href+`>; rel="`+l.Rel+`"; type="`+l.Type+`"`)
	}
	h.Set("Link", strings.Join(links, ", "))
	h.Set("Vary", "Accept, Authorization")
	if public {
		h.Set("Cache-Control", "public, "+archiveCacheControl)
	} else {
		h.Set("Cache-Control", "private, "+archiveCacheControl)
	}
	s.writeRepresentation(w, r, mediaAtom, atom.Render(f))
}
