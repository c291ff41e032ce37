package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/atom"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Record pages: one record as a person reads it, the target of each feed
// entry's <link rel="alternate" type="text/html"> (atom.Entry.Link). The
// page is reachable by whoever holds the URL the entry came from:
//
//   - GET /v1/feeds/{feed_token}/records/{received_seq}: under a feed
//     capability, no header needed, for the records of the capability's
//     repository; revoking the capability (or the token that minted it)
//     ends it with the rest (404);
//   - GET /ui/projects/{project_id}/records/{received_seq}.html?repository_id=R:
//     the web view's page of a topic's record (atom.RecordPageURL): open to
//     everyone for a public project, behind the web view's sign-in
//     otherwise (303 to the sign-in form without a session).
//
// Each page shows the record's description (atom.Describe: who, what,
// paths, revisions, the events it answers, a claim's expiry), its exact
// {event, receipt} JSON and the link to its inclusion proof in the
// project's verifiable log. Every response carries the web view's
// security headers (uiHeaders: its Content-Security-Policy, no-referrer,
// nosniff, no framing): no script, no third-party resource, and no
// agent-controlled string is ever a link (artifact locators and
// revisions are text), so a page under a capability cannot leak it. Log
// lines name the route template (logPath), never the capability.

// The routes of record pages (atom.RecordPageURL, feedRecordURL).
const (
	feedRecordRoute   = "/v1/feeds/{feed_token}/records/{received_seq:[0-9]+}"
	uiRecordPageRoute = "/ui/projects/{project_id}/records/{received_seq:[0-9]+}.html"
)

// nameCache looks up the display names of sender identities for one
// rendering, each once. A display name is written once when the identity
// is registered (or imported from a federation peer) and never updated —
// the registry has no rename, and an import inserts only identities it
// does not hold — so an entry rendered from it keeps its bytes for the
// record's life. err is the first store failure: the rendering must then
// fail (503) rather than show an id where a name belongs, which would
// change the entry's bytes later.
type nameCache struct {
	st interface {
		GetIdentity(ctx context.Context, projectID, id string) (store.Identity, error)
	}
	m   map[[2]string]string
	err error
}

func (s *Server) displayNames() *nameCache {
	return &nameCache{st: s.st, m: make(map[[2]string]string)}
}

// name is the identity's display name, "" when it is unknown, has none or
// the lookup failed (c.err).
func (c *nameCache) name(ctx context.Context, projectID, identityID string) string {
	if identityID == "" {
		return ""
	}
	k := [2]string{projectID, identityID}
	if n, ok := c.m[k]; ok {
		return n
	}
	ident, err := c.st.GetIdentity(ctx, projectID, identityID)
	switch {
	case err == nil:
		c.m[k] = ident.DisplayName
	case isNotFound(err):
		c.m[k] = ""
	case c.err == nil:
		c.err = err
	}
	return c.m[k]
}

// senderOf is the record's sender identity id ("" if unreadable).
func senderOf(rec store.Record) string {
	var ev struct {
		Sender struct {
			IdentityID string `json:"identity_id"`
		} `json:"sender"`
	}
	_ = json.Unmarshal(rec.Event, &ev)
	return ev.Sender.IdentityID
}

// recordPage is the model of the "record" template.
type recordPage struct {
	atom.Description
	Title, Author, Repository, JSON string
	ProofURL                        string // a link to the inclusion proof, "" when it needs a bearer
	ProofPath                       string // the proof's path, for a bearer client
	FeedURL                         string // where to go back, "" for none
	FeedLabel                       string
}

// recordAt reads the record received_seq of the selection's project, nil
// when there is none or it is not of repo.
func (s *Server) recordAt(ctx context.Context, projectID, repo string, seq int64) (*store.Record, error) {
	if seq < 1 {
		return nil, nil
	}
	recs, err := s.st.RecordsAfter(ctx, projectID, seq-1, 1)
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 || recs[0].ReceivedSeq != seq || recs[0].RepositoryID != repo {
		return nil, nil
	}
	return &recs[0], nil
}

// renderRecord writes a record page (200, text/html) with the web view's
// headers and Cache-Control: private, no-cache (so no cache outlives a
// revocation).
func (s *Server) renderRecord(w http.ResponseWriter, r *http.Request, rec store.Record, page recordPage) {
	d, _ := atom.Describe(string(rec.Kind), RecordJSON(rec))
	page.Description = d
	page.Repository = rec.RepositoryID
	names := s.displayNames()
	page.Author = names.name(r.Context(), rec.ProjectID, d.SenderID)
	if names.err != nil {
		s.ui.viewError(w, r, names.err)
		return
	}
	if page.Author == "" {
		page.Author = d.SenderID
	}
	page.Title = d.Title()
	page.JSON = string(RecordJSON(rec))
	w.Header().Set("Cache-Control", "private, no-cache")
	s.ui.render(w, r, http.StatusOK, "record", page)
}

// handleFeedRecord: GET /v1/feeds/{feed_token}/records/{received_seq} →
// 200 text/html, the record's page (see above); 404 (the web view's HTML
// error page) for a refused capability, another repository's record or
// none.
func (s *Server) handleFeedRecord(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	capability := mux.Vars(r)["feed_token"]
	notFound := func() {
		s.logRefusal(r, errNotFound) // the route template, never the path
		s.ui.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such record."))
	}
	ft, err := s.feedToken(r, capability)
	if err != nil {
		if err == errNotFound {
			notFound()
			return
		}
		s.ui.viewError(w, r, err)
		return
	}
	if _, err := readQuery(r); err != nil {
		s.ui.renderError(w, r, apierror.New(wire.CodeQueryInvalid).Say("This page takes no query parameters."))
		return
	}
	seq, ok := parseSeq(mux.Vars(r)["received_seq"])
	if !ok {
		notFound()
		return
	}
	rec, err := s.recordAt(r.Context(), ft.ProjectID, ft.RepositoryID, seq)
	if err != nil {
		s.ui.viewError(w, r, err)
		return
	}
	if rec == nil {
		notFound()
		return
	}
	base := s.publicBase(r)
	proof := "/log/proof/inclusion?received_seq=" + strconv.FormatInt(seq, 10)
	s.renderRecord(w, r, *rec, recordPage{
		ProofURL: base + "/v1/feeds/" + capability + proof, ProofPath: "/v1/feeds/…" + proof,
		FeedURL: feedURL(base, capability, mediaAtom, ft.RepositoryID), FeedLabel: "the feed",
	})
}

// handleRecordPage: GET /ui/projects/{project_id}/records/{received_seq}.html?repository_id=R
// → 200 text/html, the record's page (see above). A public project's
// pages need no session; a private project's need the web view's session
// of that project (303 to the sign-in form without one, 404 for another
// project). 404 when received_seq is not a record of the repository.
func (u *uiViews) handleRecordPage(w http.ResponseWriter, r *http.Request) {
	pid := mux.Vars(r)["project_id"]
	var repo string
	public := u.s.isPublic(r, pid)
	if public {
		q, err := readQuery(r, "repository_id")
		if err != nil || q["repository_id"] == "" {
			u.renderError(w, r, apierror.New(wire.CodeQueryInvalid).Say("repository_id is missing, or the query has unknown or repeated parameters."))
			return
		}
		repo = q["repository_id"]
	} else {
		var ok bool
		if _, repo, _, ok = u.projectRequest(w, r, true); !ok {
			return
		}
	}
	seq, ok := parseSeq(mux.Vars(r)["received_seq"])
	if !ok {
		u.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such record."))
		return
	}
	rec, err := u.s.recordAt(r.Context(), pid, repo, seq)
	if err != nil {
		u.viewError(w, r, err)
		return
	}
	if rec == nil {
		u.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such record."))
		return
	}
	base := u.s.publicBase(r)
	page := recordPage{ProofPath: "/v1/log/" + pid + "/proof/inclusion?received_seq=" + strconv.FormatInt(seq, 10)}
	if public {
		page.ProofURL = base + page.ProofPath
		page.FeedURL, page.FeedLabel = topicOf(store.Selection{ProjectID: pid, RepositoryID: repo}, mediaAtom).URL(base), "the feed"
	} else {
		page.FeedURL, page.FeedLabel = uiProjectPath(pid, repo), "the live view"
	}
	u.s.renderRecord(w, r, *rec, page)
}
