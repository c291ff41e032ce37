package relay

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/token"
	"github.com/acrelay/acrelay/store"
)

// Feed capabilities: a per-reader, revocable URL for a feed reader that
// cannot send a bearer token. The capability (token.NewFeed) is only in
// the URL handed out once; the store keeps its SHA-256, and logs name the
// route template, never the path (logPath).

type feedJSON struct {
	FeedID string `json:"feed_id"`
	URL    string `json:"url"`
}

// handleFeedCreate: POST /v1/feeds {"repository_id": R} with a read token →
// 201 {"feed_id", "url": "{public}/v1/feeds/{feed_token}.atom?repository_id=R"}.
func (s *Server) handleFeedCreate(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if err := requireProject(p, store.ScopeRead); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct {
		RepositoryID *string `json:"repository_id"`
	}
	if err := decodeAdmin(w, r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.RepositoryID == nil {
		s.writeError(w, r, errFeedRepositoryIDRequired)
		return
	}
	repo := *in.RepositoryID
	if !correspondence.ValidOpaqueID(repo) {
		s.writeError(w, r, errRepositoryIDInvalid)
		return
	}
	id, capability, hash := token.NewFeed()
	if _, err := s.st.CreateFeedToken(r.Context(), store.FeedToken{
		ID: id, ProjectID: p.ProjectID, RepositoryID: repo, Hash: hash, CreatedBy: p.TokenID,
	}); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "feed token created", "project_id", p.ProjectID, "feed_id", id)
	w.Header().Set("Cache-Control", "no-store")
	s.writeJSON(w, r, http.StatusCreated, mediaJSON, feedJSON{
		FeedID: id,
		URL:    feedURL(s.publicBase(r), capability, mediaAtom, repo),
	})
}

// handleFeedRevoke: DELETE /v1/feeds/{feed_id} with a read token of the
// feed's project → 204; the capability is refused from then on. Another
// project's feed id, or an unknown one: 404.
func (s *Server) handleFeedRevoke(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if err := requireProject(p, store.ScopeRead); err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.st.RevokeFeedToken(r.Context(), p.ProjectID, mux.Vars(r)["feed_id"]); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "feed token revoked", "project_id", p.ProjectID, "feed_id", mux.Vars(r)["feed_id"])
	w.WriteHeader(http.StatusNoContent)
}

// handleFeedGet: GET /v1/feeds/{feed_token}.atom?repository_id=R → the
// repository's Atom current document (RFC 5005 §3), or GET
// /v1/feeds/{feed_token}.json?repository_id=R[&after=N][&limit=L] → its
// vendor JSON page: the topic's entries, with every link under the
// capability (self, alternate, next, prev-archive → handleFeedArchive) so
// that the holder of the URL alone can follow each of them. Neither
// links the hub, the wake stream, voice or claims, which need a bearer.
// A malformed, unknown or revoked capability, or another repository: 404,
// all alike.
func (s *Server) handleFeedGet(w http.ResponseWriter, r *http.Request, media string) {
	capability := mux.Vars(r)["feed_token"]
	ft, err := s.feedToken(r, capability)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	params := []string{"repository_id"}
	if media != mediaAtom {
		params = append(params, "after", "limit")
	}
	q, err := readQuery(r, params...)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	repo, _, err := repoSelection(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if repo != ft.RepositoryID {
		s.writeError(w, r, errNotFound)
		return
	}
	after, afterStr, err := seqCursor(q, errAfterNotSeq)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := pageLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The capability is in this URL: a reader's browser must not send it
	// on as a Referer.
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.serveEvents(w, r, eventsRead{
		sel:   store.Selection{ProjectID: ft.ProjectID, RepositoryID: repo},
		after: after, afterStr: afterStr, limit: limit, limitStr: q["limit"],
		media: media, topic: true, capability: capability,
	})
}

// handleFeedArchive: GET /v1/feeds/{feed_token}/archives/{k}.atom → the
// capability's repository's archive k (RFC 5005 §4; serveArchive), whose
// self, current, prev-archive and next-archive links are under the
// capability. Cached privately only, so a shared cache never outlives a
// revocation. A refused capability: 404, as for handleFeedGet.
func (s *Server) handleFeedArchive(w http.ResponseWriter, r *http.Request) {
	capability := mux.Vars(r)["feed_token"]
	ft, err := s.feedToken(r, capability)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if _, err := readQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	base := s.publicBase(r)
	s.serveArchive(w, r, store.Selection{ProjectID: ft.ProjectID, RepositoryID: ft.RepositoryID}, "private", archiveNames{
		archive: func(k int64) string { return feedArchiveURL(base, capability, k) },
		current: feedURL(base, capability, mediaAtom, ft.RepositoryID),
		record:  feedRecordLink(base, capability),
	})
}

// feedURL is a capability's document in media (Atom or vendor JSON).
func feedURL(base, capability, media, repo string) string {
	ext := ".json"
	if media == mediaAtom {
		ext = ".atom"
	}
	return base + "/v1/feeds/" + capability + ext + "?repository_id=" + url.QueryEscape(repo)
}

// feedRecordURL is a capability's page of the record received_seq
// (handleFeedRecord).
func feedRecordURL(base, capability string, seq int64) string {
	return base + "/v1/feeds/" + capability + "/records/" + strconv.FormatInt(seq, 10)
}

// feedArchiveURL is a capability's archive k.
func feedArchiveURL(base, capability string, k int64) string {
	return base + "/v1/feeds/" + capability + "/archives/" + strconv.FormatInt(k, 10) + ".atom"
}

// feedToken checks a feed capability the way authenticate checks a bearer
// token: its id finds the one stored hash, compared in constant time, with
// the same work when none is stored. Errors: 404 for anything refused.
func (s *Server) feedToken(r *http.Request, capability string) (store.FeedToken, error) {
	id, err := token.FeedID(strings.TrimSpace(capability))
	if err != nil {
		return store.FeedToken{}, errNotFound
	}
	ft, err := s.st.FeedToken(r.Context(), id)
	if err != nil {
		if isNotFound(err) {
			token.Matches(capability, make([]byte, 32))
			return store.FeedToken{}, errNotFound
		}
		return store.FeedToken{}, err
	}
	if !token.Matches(capability, ft.Hash) || ft.Revoked {
		return store.FeedToken{}, errNotFound
	}
	// A capability lives no longer than the token that minted it: revoking
	// a reader's token ends the feeds it made, which an admin could not
	// otherwise find (their ids are shown only to the reader).
	minter, err := s.st.GetToken(r.Context(), ft.CreatedBy)
	if err != nil {
		if isNotFound(err) {
			return store.FeedToken{}, errNotFound
		}
		return store.FeedToken{}, err
	}
	if minter.Revoked {
		return store.FeedToken{}, errNotFound
	}
	return ft, nil
}
