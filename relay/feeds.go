package relay

import (
	"net/http"
	"net/url"
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
		s.writeError(w, r, errRepositoryIDRequired)
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
		URL:    s.publicBase(r) + "/v1/feeds/" + capability + ".atom?repository_id=" + url.QueryEscape(repo),
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
// repository's Atom topic document (current document, hub and self links:
// the same bytes as the topic's GET). A malformed, unknown or revoked
// capability, or another repository: 404, all alike.
func (s *Server) handleFeedGet(w http.ResponseWriter, r *http.Request) {
	ft, err := s.feedToken(r, mux.Vars(r)["feed_token"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := readQuery(r, "repository_id")
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
	// The capability is in this URL: a reader's browser must not send it
	// on as a Referer.
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.serveEvents(w, r, eventsRead{
		sel:   store.Selection{ProjectID: ft.ProjectID, RepositoryID: repo},
		limit: 100, media: mediaAtom, topic: true,
	})
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
	return ft, nil
}
