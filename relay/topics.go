package relay

import (
	"context"
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
	// capability: the feed capability this read came through (relay/feeds.go),
	// "" for any other read. Every link of its document then points under
	// the capability, and nothing that needs a bearer is linked (no hub, no
	// wake template, no voice or claims).
	capability string
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

// currentPage reads the Atom topic's current (subscription) document, RFC
// 5005 §3, under the overlap rule: with A = n/200 complete archives of the
// selection's n records, it holds the records at positions
// [200·max(A-1, 0), n) — the newest complete archive's 200 records and the
// n mod 200 after them — so it always carries at least the newest
// min(n, 200) records (between 200 and 399 once n ≥ 200). A feed reader
// that never follows archives (most do not) misses nothing as long as it
// polls once per 200 new records. The document duplicates archive A-1
// (RFC 5005 lets an entry appear in more than one document; readers
// de-duplicate by <id>); its prev-archive names the archive before the
// first record it holds, A-2 (returned as prev, -1 when there is none), so
// a walk from it along prev-archive meets every record exactly once.
// Archives never change. With in.limitStr the document holds the first
// limit of those records and a next link. Its start moves only when an
// archive completes, so between two completions it only grows.
func (s *Server) currentPage(r *http.Request, in eventsRead) (page store.EventPage, prev int64, err error) {
	n, err := s.st.CountRecords(r.Context(), in.sel)
	if err != nil {
		return store.EventPage{}, 0, err
	}
	start := max(n/store.ArchiveSize-1, 0) * store.ArchiveSize
	limit := in.limit
	if in.limitStr == "" {
		limit = 2 * store.ArchiveSize // more than n - start (< 400) unless records arrive meanwhile
	}
	for len(page.Records) <= limit {
		chunk := min(limit+1-len(page.Records), store.ArchiveSize+1)
		recs, err := s.st.RecordsAt(r.Context(), in.sel, start+int64(len(page.Records)), chunk)
		if err != nil {
			return store.EventPage{}, 0, err
		}
		page.Records = append(page.Records, recs...)
		if len(recs) < chunk {
			break
		}
	}
	if len(page.Records) > limit {
		page.Records, page.HasMore = page.Records[:limit], true
	}
	return page, start/store.ArchiveSize - 1, nil
}

// serveEvents ends a read of records with the page in in.media.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, in eventsRead) {
	repo, thread := in.sel.RepositoryID, in.sel.ThreadID
	var page store.EventPage
	prevArchive := int64(-1)
	var err error
	if in.topic && in.media == mediaAtom && in.afterStr == nil {
		page, prevArchive, err = s.currentPage(r, in)
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
	if in.capability != "" {
		self, hubURL = feedURL(base, in.capability, in.media, repo), ""
	}
	nextAfter := in.afterStr
	if n := len(page.Records); n > 0 {
		v := strconv.FormatInt(page.Records[n-1].ReceivedSeq, 10)
		nextAfter = &v
	}
	ls := linkSet{self: self, selfType: in.media, hub: hubURL, capability: in.capability != "", capToken: in.capability}
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
	switch {
	case in.capability != "" && in.media == mediaAtom:
		ls.alternate, ls.alternateType = feedURL(base, in.capability, mediaVendorJSON, repo), mediaVendorJSON
	case in.capability != "":
		ls.alternate, ls.alternateType = feedURL(base, in.capability, mediaAtom, repo), mediaAtom
	case in.media == mediaAtom:
		ls.alternate, ls.alternateType = jsonURL, mediaVendorJSON
	default:
		ls.alternate, ls.alternateType = atomURL, mediaAtom
	}
	s.setCorrespondenceHeaders(w, r, in.sel, ls)

	var body []byte
	if in.media == mediaAtom {
		link := topicRecordLink(base)
		if in.capability != "" {
			link = feedRecordLink(base, in.capability)
		}
		f, err := s.atomFeed(r, page, repo, thread, jsonURL, ls, link)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if prevArchive >= 0 {
			prev := archiveURL(base, in.sel, prevArchive)
			if in.capability != "" {
				prev = feedArchiveURL(base, in.capability, prevArchive)
			}
			f.Links = append(f.Links, atom.Link{Rel: "prev-archive", Type: mediaAtom, Href: prev})
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

// atomFeed is a page's Atom document: id is the selection's JSON URL
// (the same feed whichever way it was reached); the links are ls's (hub,
// self, alternate, next); a feed capability's document carries no wake
// template, whose stream needs a bearer.
func (s *Server) atomFeed(r *http.Request, page store.EventPage, repo, thread, id string, ls linkSet, link func(store.Record) string) (atom.Feed, error) {
	f := atom.Feed{
		ID:      id,
		Title:   "agent-correspondence " + repo,
		Updated: time.Unix(0, 0).UTC(),
	}
	if ls.hub != "" {
		f.Links = append(f.Links, atom.Link{Rel: "hub", Href: ls.hub})
	}
	f.Links = append(f.Links,
		atom.Link{Rel: "self", Type: mediaAtom, Href: ls.self},
		atom.Link{Rel: "alternate", Type: ls.alternateType, Href: ls.alternate})
	if !ls.capability {
		f.LinkTemplate = &atom.LinkTemplate{Template: s.wakeTemplate(r), Rel: relLive, Type: "text/event-stream"}
	}
	if thread != "" {
		f.Title += " / " + thread
	}
	if ls.next != "" {
		f.Links = append(f.Links, atom.Link{Rel: "next", Type: mediaAtom, Href: ls.next})
	}
	err := s.addEntries(r.Context(), &f, page.Records, link)
	return f, err
}

// addEntries appends recs to f as entries: each with its sender's display
// name (nameCache) and link(rec), the URL of its record page. Errors: a
// store failure reading a display name.
func (s *Server) addEntries(ctx context.Context, f *atom.Feed, recs []store.Record, link func(store.Record) string) error {
	names := s.displayNames()
	for _, rec := range recs {
		f.Entries = append(f.Entries, atom.Entry{
			EventID: rec.EventID, Kind: string(rec.Kind), RepositoryID: rec.RepositoryID, ThreadID: rec.ThreadID,
			ReceivedAt: rec.ReceivedAt, Record: RecordJSON(rec),
			Author: names.name(ctx, rec.ProjectID, senderOf(rec)), Link: link(rec),
		})
		if rec.ReceivedAt.After(f.Updated) {
			f.Updated = rec.ReceivedAt
		}
	}
	return names.err
}

// topicRecordLink links a topic's entries (current document, archives) to
// their record pages in the web view (atom.RecordPageURL).
func topicRecordLink(base string) func(store.Record) string {
	return func(rec store.Record) string {
		return atom.RecordPageURL(base, rec.ProjectID, rec.RepositoryID, rec.ReceivedSeq)
	}
}

// feedRecordLink links a feed capability's entries to their record pages
// under the capability (handleFeedRecord).
func feedRecordLink(base, capability string) func(store.Record) string {
	return func(rec store.Record) string { return feedRecordURL(base, capability, rec.ReceivedSeq) }
}

// handleArchive: GET /v1/correspondence/archives/{k}.atom (RFC 5005 §4),
// with the topic's auth: a read token of the project, or none for a public
// project named by project_id. 200, or 404 for an archive that is not
// complete (yet).
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
	if !public {
		public = s.isPublic(r, pid)
	}
	scope := "private"
	if public {
		scope = "public"
	}
	base := s.publicBase(r)
	sel := store.Selection{ProjectID: pid, RepositoryID: repo, ThreadID: thread}
	s.serveArchive(w, r, sel, scope, archiveNames{
		archive: func(k int64) string { return archiveURL(base, sel, k) },
		current: topicOf(sel, mediaAtom).URL(base),
		record:  topicRecordLink(base),
	})
}

// archiveNames are the URLs an archive document links to: the topic's
// (archiveURL and the topic), or a feed capability's (relay/feeds.go).
type archiveNames struct {
	archive func(k int64) string
	current string
	record  func(store.Record) string // an entry's record page
}

// serveArchive ends a read of archive {k} of sel (RFC 5005 §4): the
// records at positions [200k, 200k+200), 404 until all of them exist. Its
// <id> is the topic's archive URL however it was reached. It links to
// current, to archive k-1 (prev-archive) and, once archive k+1 is complete,
// to it (next-archive): every link names a document that exists. An
// archive's entries never change; its links change once, when the next
// archive completes, so the newest archive is revalidated (no-cache, with
// its ETag) and every older one is cached as immutable (RFC 8246). scope
// is "public" or "private", the Cache-Control's first directive.
func (s *Server) serveArchive(w http.ResponseWriter, r *http.Request, sel store.Selection, scope string, names archiveNames) {
	k, ok := parseSeq(mux.Vars(r)["k"])
	if !ok || k > math.MaxInt64/store.ArchiveSize-2 {
		s.writeError(w, r, errNotFound)
		return
	}
	n, err := s.st.CountRecords(r.Context(), sel)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if n < (k+1)*store.ArchiveSize {
		s.writeError(w, r, errNotFound)
		return
	}
	recs, err := s.st.RecordsAt(r.Context(), sel, k*store.ArchiveSize, store.ArchiveSize)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(recs) < store.ArchiveSize { // only if records vanished between the reads
		s.writeError(w, r, errNotFound)
		return
	}
	newest := n < (k+2)*store.ArchiveSize
	self := names.archive(k)
	f := atom.Feed{
		ID:      archiveURL(s.publicBase(r), sel, k),
		Title:   "agent-correspondence " + sel.RepositoryID,
		Updated: time.Unix(0, 0).UTC(),
		Archive: true,
		Links: []atom.Link{
			{Rel: "self", Type: mediaAtom, Href: self},
			{Rel: "current", Type: mediaAtom, Href: names.current},
		},
	}
	if sel.ThreadID != "" {
		f.Title += " / " + sel.ThreadID
	}
	if k > 0 {
		f.Links = append(f.Links, atom.Link{Rel: "prev-archive", Type: mediaAtom, Href: names.archive(k - 1)})
	}
	if !newest {
		f.Links = append(f.Links, atom.Link{Rel: "next-archive", Type: mediaAtom, Href: names.archive(k + 1)})
	}
	f.Title += " (archive " + strconv.FormatInt(k, 10) + ")"
	if err := s.addEntries(r.Context(), &f, recs, names.record); err != nil {
		s.writeError(w, r, err)
		return
	}

	h := w.Header()
	var links []string
	for _, l := range f.Links {
		links = append(links, "<"+l.Href+`>; rel="`+l.Rel+`"; type="`+l.Type+`"`)
	}
	h.Set("Link", strings.Join(links, ", "))
	h.Set("Vary", "Accept, Authorization")
	if newest {
		h.Set("Cache-Control", scope+", no-cache")
	} else {
		h.Set("Cache-Control", scope+", "+archiveCacheControl)
	}
	s.writeRepresentation(w, r, mediaAtom, atom.Render(f))
}
