package relay

import (
	"context"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/witness"
)

// Handler returns the relay's routes. Every route but /healthz, /readyz,
// /v1/profile, /websub/hub and the feed capability's GET needs a bearer
// token, except the reads a public project opens to everyone; every
// correspondence route acts on the bearer's project.
func (s *Server) Handler() http.Handler {
	// An unclean path (dot segments, doubled slashes) is not redirected to its clean form, which gorilla/mux would do
	// with an empty 301 before any route or token check (for a POST too):
	// it matches no route and gets the JSON 404.
	m := mux.NewRouter().SkipClean(true)
	m.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.writeError(w, r, errNotFound) })
	m.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, errMethodNotAllowed)
	})
	m.HandleFunc("/", s.handleHome) // HTML to a browser, the JSON 404 to anyone else (relay/home.go)
	m.HandleFunc("/healthz", s.handleHealth).Methods("GET", "HEAD")
	m.HandleFunc("/readyz", s.handleReady).Methods("GET", "HEAD")
	if s.cfg.MetricsHandler != nil {
		m.HandleFunc("/metrics", s.handleMetrics).Methods("GET") // operator token (relay/metrics.go)
	}
	if s.cfg.Metrics != nil {
		m.Use(noteRoute)
	}
	m.Use(s.limitClients) // the per-client-address rate of the routes that need no token (relay/limits.go)
	// The embedded WebSub hub (spec/websub.md): no bearer middleware, since
	// public topics and unsubscribes need none; the hub checks private
	// topics through AuthorizeTopic.
	if s.cfg.Hub != nil {
		m.Handle(hub.HubPath, s.cfg.Hub).Methods("POST")
	}
	// A feed capability is in the path and is never a bearer token, so its
	// GETs (the current document, its JSON alternate, its archives) are
	// outside the bearer check.
	m.HandleFunc("/v1/feeds/{feed_token}.atom", func(w http.ResponseWriter, r *http.Request) { s.handleFeedGet(w, r, mediaAtom) }).Methods("GET", "HEAD")
	m.HandleFunc("/v1/feeds/{feed_token}.json", func(w http.ResponseWriter, r *http.Request) { s.handleFeedGet(w, r, mediaVendorJSON) }).Methods("GET", "HEAD")
	m.HandleFunc("/v1/feeds/{feed_token}/archives/{k:[0-9]+}.atom", s.handleFeedArchive).Methods("GET", "HEAD")
	m.HandleFunc(feedRecordRoute, s.handleFeedRecord).Methods("GET", "HEAD") // an entry's record page (relay/recordpage.go)
	// A peer link's WebSub callback: the hub sends no bearer; the link
	// checks the challenge and each delivery's HMAC (relay/peers.go); a
	// refused verification is the JSON 404 (relay/callback.go).
	m.HandleFunc(CallbackPath+"{peer_id}", s.handlePeerCallback).Methods("GET", "POST")
	m.HandleFunc(profilePath, s.handleProfile).Methods("GET", "HEAD") // rel="describedby" of correspondence responses
	m.HandleFunc(logKeyPath, s.handleLogKey).Methods("GET", "HEAD")
	m.HandleFunc(witness.KeyPath, s.handleWitnessKey).Methods("GET", "HEAD") // relay/witness.go
	// This relay as a C2SP tlog-witness of the logs its operator lists: no
	// token, the checkpoint's signature is the authentication (relay/witness.go).
	m.HandleFunc(witness.AddCheckpointPath, s.handleAddCheckpoint).Methods("POST")
	// The verifiable log under a feed capability (relay/log.go).
	m.HandleFunc("/v1/feeds/{feed_token}/log/{rest:.+}", s.handleFeedLog).Methods("GET", "HEAD")

	// Live web view (relay/ui.go): a session cookie from the sign-in form,
	// never a bearer; its own security headers on every response.
	ui := newUI(s)
	s.ui = ui
	uiRoutes := m.MatcherFunc(func(r *http.Request, _ *mux.RouteMatch) bool { return strings.HasPrefix(r.URL.Path, "/ui/") }).Subrouter()
	uiRoutes.Use(ui.uiMiddleware)
	uiRoutes.HandleFunc("/ui/signin", ui.handleSignInForm).Methods("GET", "HEAD")
	uiRoutes.HandleFunc("/ui/signin", ui.handleSignIn).Methods("POST")
	uiRoutes.HandleFunc("/ui/signout", ui.handleSignOut).Methods("POST")
	uiRoutes.HandleFunc("/ui/projects/{project_id}", ui.handleProject).Methods("GET", "HEAD")
	uiRoutes.HandleFunc("/ui/projects/{project_id}/fragment", ui.handleFragment).Methods("GET", "HEAD")
	uiRoutes.HandleFunc("/ui/projects/{project_id}/live", ui.handleLive).Methods("GET")
	uiRoutes.HandleFunc(uiRecordPageRoute, ui.handleRecordPage).Methods("GET", "HEAD") // before the JSON route, which would match it too
	uiRoutes.HandleFunc("/ui/projects/{project_id}/records/{received_seq}", ui.handleRecord).Methods("GET", "HEAD")
	uiRoutes.PathPrefix("/ui/static/").HandlerFunc(ui.handleStatic).Methods("GET", "HEAD")

	api := m.NewRoute().Subrouter()
	api.Use(s.authMiddleware)

	// Correspondence (spec §9).
	api.HandleFunc("/v1/correspondence/events", s.handleEventsPost).Methods("POST")
	// Reads named routePublicRead need no token for a public project
	// (spec/websub.md "Topics"; readProject).
	api.HandleFunc("/v1/correspondence/events", func(w http.ResponseWriter, r *http.Request) { s.handleEventsGet(w, r, "") }).Methods("GET", "HEAD").Name(routePublicRead)
	api.HandleFunc("/v1/correspondence/events.atom", func(w http.ResponseWriter, r *http.Request) { s.handleEventsGet(w, r, mediaAtom) }).Methods("GET", "HEAD").Name(routePublicRead + " atom")
	api.HandleFunc("/v1/correspondence/events.json", func(w http.ResponseWriter, r *http.Request) { s.handleEventsGet(w, r, mediaVendorJSON) }).Methods("GET", "HEAD").Name(routePublicRead + " json")
	api.HandleFunc("/v1/correspondence/archives/{k:[0-9]+}.atom", s.handleArchive).Methods("GET", "HEAD").Name(routePublicRead + " archive")
	api.HandleFunc("/v1/correspondence/keys", s.handleKeysGet).Methods("GET", "HEAD").Name(routePublicRead + " keys")
	api.HandleFunc("/v1/correspondence/claims", s.handleClaims).Methods("GET", "HEAD").Name(routePublicRead + " claims")
	api.HandleFunc("/v1/correspondence/voice", s.handleVoice).Methods("GET", "HEAD").Name(routePublicRead + " voice")
	api.HandleFunc("/v1/wake/voice", s.handleWake).Methods("GET")
	// The verifiable log (relay/log.go): public projects need no token.
	api.HandleFunc("/v1/log/{project_id}/{rest:.+}", s.handleLog).Methods("GET", "HEAD").Name(routePublicRead + " log")

	// The verifiable log: a peer's cosignature on this relay's checkpoint (relay/witness.go).
	api.HandleFunc("/v1/log/{project_id}/cosignatures", s.handleCosignaturePost).Methods("POST")

	// Feed capabilities for feed readers (their GET is above).
	api.HandleFunc("/v1/feeds", s.handleFeedCreate).Methods("POST")
	api.HandleFunc("/v1/feeds/{feed_id}", s.handleFeedRevoke).Methods("DELETE")

	// Predicate envelopes and handoff contracts.
	api.HandleFunc("/v1/envelopes/canonicalize", s.handleEnvelopeCanonicalize).Methods("POST")
	api.HandleFunc("/v1/handoffs", s.handleHandoffList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/handoffs/{handoff_id}", s.handleHandoffPut).Methods("PUT")
	api.HandleFunc("/v1/handoffs/{handoff_id}", s.handleHandoffGet).Methods("GET", "HEAD")
	api.HandleFunc("/v1/handoffs/{handoff_id}/transitions", s.handleHandoffTransition).Methods("POST")
	api.HandleFunc("/v1/handoffs/{handoff_id}/versions", s.handleHandoffVersions).Methods("GET", "HEAD")

	// Registry (spec §10).
	api.HandleFunc("/v1/whoami", s.handleWhoami).Methods("GET")
	api.HandleFunc("/v1/admin/projects", s.handleProjectCreate).Methods("POST")
	api.HandleFunc("/v1/admin/projects", s.handleProjectList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/projects/{project_id}", s.handleProjectUpdate).Methods("PATCH")
	api.HandleFunc("/v1/admin/projects/{project_id}/identities", s.handleIdentityCreate).Methods("POST")
	api.HandleFunc("/v1/admin/projects/{project_id}/identities", s.handleIdentityList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/projects/{project_id}/tokens", s.handleTokenCreate).Methods("POST")
	api.HandleFunc("/v1/admin/projects/{project_id}/tokens", s.handleTokenList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/identities/{identity_id}/keys", s.handleKeyAdd).Methods("POST")
	api.HandleFunc("/v1/admin/identities/{identity_id}/keys", s.handleKeyList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/identities/{identity_id}/deactivate", s.handleIdentityDeactivate).Methods("POST")
	api.HandleFunc("/v1/admin/keys/{signing_key_id}/revoke", s.handleKeyRevoke).Methods("POST")
	api.HandleFunc("/v1/admin/tokens/{token_id}", s.handleTokenRevoke).Methods("DELETE")
	api.HandleFunc("/v1/admin/projects/{project_id}/peers", s.handlePeerCreate).Methods("POST")
	api.HandleFunc("/v1/admin/projects/{project_id}/peers", s.handlePeerList).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/projects/{project_id}/peers/{peer_id}", s.handlePeerRemove).Methods("DELETE")
	api.HandleFunc("/v1/admin/projects/{project_id}/peers/{peer_id}", s.handlePeerGet).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/projects/{project_id}/matrix/bindings", s.handleMatrixBind).Methods("POST")
	api.HandleFunc("/v1/admin/projects/{project_id}/matrix/bindings", s.handleMatrixBindings).Methods("GET", "HEAD")
	api.HandleFunc("/v1/admin/projects/{project_id}/matrix/bindings/{binding_id}", s.handleMatrixUnbind).Methods("DELETE")

	// An encoded slash is never a path separator here: gorilla/mux matches
	// the decoded path, where /v1%2Fadmin/... would pass for /v1/admin/...
	// (and slip past a proxy rule on that prefix).
	return s.instrument(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A hub POST from a client over its rate is refused before routing
		// (relay/limits.go refuseHubEarly).
		if s.refuseHubEarly(w, r) {
			noteRouteOf(r, hub.HubPath)
			return
		}
		if strings.Contains(strings.ToLower(r.URL.RawPath), "%2f") {
			s.writeError(w, r, errNotFound)
			return
		}
		m.ServeHTTP(w, r)
	}))
}

func (s *Server) authMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if anonymousRead(r) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, principal{Anonymous: true})))
			return
		}
		p, err := s.authenticate(r)
		if err != nil {
			if isUnauthorized(err) && !s.allowClient(w, r) {
				return // a client guessing tokens is held to the client rate
			}
			s.writeError(w, r, err)
			return
		}
		if !s.allowTokenWrite(w, r, p) {
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

// handleHealth: GET /healthz → 200 "ok", or 503 unavailable when the store
// cannot be read or reports itself unhealthy (for SQLite, while its WAL
// checkpoint is failing: appends still work, but the WAL grows until the
// relay restarts, so a supervisor's probe should restart it). The cause is
// logged, never sent.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	var err error
	if h, ok := s.st.(store.HealthChecker); ok {
		err = h.Health(r.Context())
	} else {
		_, err = s.st.CountProjects(r.Context())
	}
	if err != nil {
		s.log.Warn("health check failed", "err", err)
		s.writeError(w, r, errUnavailable)
		return
	}
	s.writeBytes(w, r, http.StatusOK, "text/plain; charset=utf-8", []byte("ok\n"))
}
