package relay

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/mod/sumdb/note"

	"github.com/acrelay/acrelay/couriers"
	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/ingest"
	"github.com/acrelay/acrelay/internal/token"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// MaxEventBytes is the raw POST body cap of spec §3 (413 body_too_large):
// ingest.MaxEventBytes, enforced here while the body is read.
const MaxEventBytes = ingest.MaxEventBytes

// Config holds what a Server needs. cmd/acrelay builds it from flags.
type Config struct {
	// PublicURL is the absolute base for links and topics, without a
	// trailing slash, e.g. "http://127.0.0.1:8080".
	PublicURL string
	// OperatorTokenHash is SHA-256 of the server-wide operator token
	// (creates projects, administers any project). Nil disables it.
	OperatorTokenHash []byte
	// OperatorToken, when set and OperatorTokenHash is nil, is hashed by New.
	OperatorToken string
	Logger        *slog.Logger
	// WakeHeartbeat is the interval of the wake stream's heartbeat
	// comment; 0 means DefaultWakeHeartbeat (15s).
	WakeHeartbeat time.Duration
	// WakeWriteTimeout bounds each wake frame's write; 0 means
	// DefaultWakeWriteTimeout.
	WakeWriteTimeout time.Duration
	// WakeMaxStreamsPerToken caps open wake streams per bearer token
	// (429 too_many_streams beyond it); 0 means DefaultWakeMaxStreamsPerToken,
	// a negative value no cap.
	WakeMaxStreamsPerToken int
	// Hub serves POST /websub/hub (the embedded WebSub hub, *hub.Hub); nil
	// leaves the route out (404). The route needs no bearer: the hub asks
	// AuthorizeTopic for private topics.
	Hub http.Handler
	// TokenRevoked, when set, is called after a token was revoked through
	// the admin API (the hub's DenyRevoked: it ends the subscriptions the
	// token created). Its error is logged; the revocation stands.
	TokenRevoked func(ctx context.Context, tokenID string) error
	// Matrix makes and removes Matrix bindings (relay/appservice.go); nil
	// when no homeserver is configured (the binding routes answer 404).
	Matrix MatrixBinder
	// Metrics, when set, counts and times every request and reports the
	// wake streams and WebSub subscriptions (relay/metrics.go).
	Metrics *Metrics
	// MetricsHandler, when set, serves GET /metrics on this handler, for
	// the operator token only (handleMetrics); nil leaves the route out
	// (the metrics may then be served on a listener of their own).
	MetricsHandler http.Handler
	// Couriers, when set, returns each courier's progress for GET /readyz.
	Couriers func() []couriers.Status
	// Peers runs the federation peer links (relay/peers.go); nil leaves
	// the callback route answering 404, and links made through the admin
	// routes start at the next serve.
	Peers PeerLinks
	// CheckRemote, when set, checks a new peer link's remote_url with the
	// SSRF guard (ssrf.Guard.CheckCallbackResolved): a refused address is
	// 400 remote_url_invalid and nothing is stored or requested.
	CheckRemote func(ctx context.Context, raw string) error
	// Limits are the request rates (relay/limits.go); the zero value limits
	// nothing.
	Limits RateLimits
	// LogVerifierKey is the verifiable log's verifier key (name+hash+key,
	// golang.org/x/mod/sumdb/note), served at /v1/log-key and on the
	// profile page; "" serves neither (404).
	LogVerifierKey string
	// LogSigner, when set, is the log key's signer: an empty log's
	// checkpoint (size 0, the empty tree's root, C2SP tlog-witness) is
	// signed with it when read, so a project answers a checkpoint from
	// its creation. Nil: an empty log is 404 log_empty.
	LogSigner note.Signer
	// LogWitnessNames are the key names of the external witnesses
	// configured (--log-witness): a split view one of them reported on
	// our own log (store.LogWitnessPeerPrefix evidence) degrades /readyz
	// ("log_witness_split_view") while it is configured.
	LogWitnessNames []string
	// WitnessLogs are the other logs this relay witnesses as a C2SP
	// tlog-witness (POST /v1/witness/add-checkpoint, relay/witness.go):
	// per origin, the log keys trusted for it. Empty: every origin is
	// unknown (404).
	WitnessLogs map[string][]note.Verifier
	// LogCosignatures, when set, returns the checkpoint served at
	// …/log/checkpoint: the log's signed note with the cosignatures the
	// relay holds on it (witnesses, spec/tlog.md §Checkpoints); an error
	// is logged and serves the log's signature alone. Nil means the
	// cosignatures the store holds (store.Cosignatures, relay/witness.go).
	LogCosignatures func(ctx context.Context, projectID string, checkpoint []byte) ([]byte, error)
}

// Server serves the HTTP surface over one store.
type Server struct {
	st     Store
	cfg    Config
	log    *slog.Logger
	public string
	wake   *wakeFanout
	ingest *ingest.Ingester
	ui     *uiViews // the live web view's sessions and streams (set by Handler)
	limits limiters // per-client-address and per-token rates (relay/limits.go)

	ltOnce  sync.Once
	ltField string // Link-Template field when PublicURL is set

	tiles  tileCache // the log's tiles read recently (relay/log.go)
	hashes hashCache // the log's stored hashes proofs computed
	gzips  gzipCache // entry bundles compressed recently (relay/logbundle.go)
}

// New returns a Server over st. It starts no goroutines.
func New(st Store, cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OperatorTokenHash == nil && cfg.OperatorToken != "" {
		cfg.OperatorTokenHash = token.Hash(cfg.OperatorToken)
	}
	s := &Server{st: st, cfg: cfg, log: cfg.Logger, public: strings.TrimRight(cfg.PublicURL, "/"), ingest: ingest.New(st, ingest.Options{}), limits: newLimiters(cfg.Limits)}
	if s.cfg.LogCosignatures == nil {
		s.cfg.LogCosignatures = s.cosignedCheckpoint
	}
	maxStreams := cfg.WakeMaxStreamsPerToken
	if maxStreams == 0 {
		maxStreams = DefaultWakeMaxStreamsPerToken
	}
	s.wake = newWakeFanout(st, cfg.Logger, maxStreams) // fed by the store's advances (spec §9)
	if cfg.Metrics != nil {
		cfg.Metrics.reg.MustRegister(serverCollector{s}, limiterCollector{s})
	}
	return s
}

// HTTPServer returns an *http.Server for h with all four timeouts (STYLE
// §7): a bounded header read, whole-request read and response write, and
// idle time. The wake stream clears its read deadline and moves its write
// deadline forward frame by frame, so long-lived streams are not cut;
// every other request and response is bounded, so a client that trickles
// a body (even one a handler never reads) or reads a page slowly cannot
// hold a connection.
func HTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// CloseStreams ends every open wake stream and live web view stream; register it with
// http.Server.RegisterOnShutdown so a graceful shutdown does not wait for
// streams that never go idle.
func (s *Server) CloseStreams() {
	s.wake.endWhere(func(string, *wakeSub) bool { return true })
	if s.ui != nil {
		s.ui.closeStreams()
	}
}

// bodyReadTimeout bounds how long a client may take to send a request body.
const bodyReadTimeout = 30 * time.Second

func (s *Server) publicBase(r *http.Request) string {
	if s.public != "" {
		return s.public
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// writeJSON ends a request with v as JSON of the given media type, a strong
// ETag, and no body for HEAD.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, mediaType string, v any) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		s.log.ErrorContext(r.Context(), "encode response", "err", err)
		w.Header().Set("Content-Type", wire.ContentTypeJSON)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"internal_error","message":"internal error"}`))
		return
	}
	s.writeBytes(w, r, status, mediaType, b)
}

// writeBytes ends a request with b as mediaType, served under its
// wire.ContentType (JSON and Atom with "; charset=utf-8", spec §9).
func (s *Server) writeBytes(w http.ResponseWriter, r *http.Request, status int, mediaType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", wire.ContentType(mediaType))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

// ctxKey is the type of request-scoped context keys.
type ctxKey int

const principalKey ctxKey = 1

// principal is who a request's bearer token speaks for.
type principal struct {
	// Anonymous: no Authorization header on a route that public projects
	// open to everyone (routePublicRead); see readProject.
	Anonymous bool
	Operator  bool
	ProjectID string
	TokenID   string
	Scopes    []string
}

func (p principal) has(scope string) bool {
	if p.Operator {
		return true
	}
	for _, s := range p.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey).(principal)
	return p
}

// authenticate resolves the bearer token. Unknown, revoked or malformed
// tokens are all 401 with one message, so nothing is learned from the
// difference; the hint differs only between no bearer token sent
// (errUnauthorized: send one) and one sent and refused (errTokenRejected).
func (s *Server) authenticate(r *http.Request) (principal, error) {
	return authenticate(r, s.st, s.cfg.OperatorTokenHash)
}

// tokenReader is what authenticate reads a project token from.
type tokenReader interface {
	GetToken(ctx context.Context, id string) (store.Token, error)
}

// authenticate is Server.authenticate over the store's tokens and the
// operator token's hash alone, so that TopicAuth can be built before the
// Server.
func authenticate(r *http.Request, st tokenReader, operatorTokenHash []byte) (principal, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return principal{}, errUnauthorized // ambiguous: never pick one
	}
	authz := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(authz, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return principal{}, errUnauthorized
	}
	tok = strings.TrimSpace(tok)
	if operatorTokenHash != nil && token.Matches(tok, operatorTokenHash) {
		return principal{Operator: true}, nil
	}
	id, err := token.ID(tok)
	if err != nil {
		return principal{}, errTokenRejected
	}
	t, err := st.GetToken(r.Context(), id)
	if err != nil {
		if isNotFound(err) {
			token.Matches(tok, make([]byte, 32)) // same work as a found token
			return principal{}, errTokenRejected
		}
		return principal{}, err
	}
	if !token.Matches(tok, t.Hash) || t.Revoked {
		return principal{}, errTokenRejected
	}
	return principal{ProjectID: t.ProjectID, TokenID: t.ID, Scopes: t.Scopes}, nil
}

// requireProject checks that the request carries a project token with the
// scope; correspondence routes always act on the bearer's own project.
func requireProject(p principal, scope string) error {
	if p.Operator {
		return errProjectToken
	}
	if !p.has(scope) {
		return errScope(scope)
	}
	return nil
}

// requireAdminOf checks that the request may administer projectID: the
// operator token, or a token of that project with the admin scope. A token
// of another project learns nothing: 404.
func requireAdminOf(p principal, projectID string) error {
	if p.Operator {
		return nil
	}
	if p.ProjectID != projectID {
		return errNotFound
	}
	if !p.has(store.ScopeAdmin) {
		return errScope(store.ScopeAdmin)
	}
	return nil
}

// AuthorizeTopic is TopicAuth.AuthorizeTopic over the Server's store and
// operator token.
func (s *Server) AuthorizeTopic(r *http.Request, projectID string) (tokenID string, public bool, err error) {
	return NewTopicAuth(s.st, s.cfg.OperatorTokenHash).AuthorizeTopic(r, projectID)
}

// TopicAuth is the embedded hub's capability check (hub.Options.Authorize)
// on its own: it needs only the store and the operator token's hash, so
// cmd builds it before the hub, and the Server, which routes /websub/hub
// to the hub, after it.
type TopicAuth struct {
	st                topicAuthStore
	operatorTokenHash []byte
}

// topicAuthStore is what TopicAuth reads: a project's visibility and a
// bearer's token.
type topicAuthStore interface {
	tokenReader
	ProjectVisibility(ctx context.Context, projectID string) (string, error)
}

// NewTopicAuth returns the check over st; operatorTokenHash is the
// operator token's hash (Config.OperatorTokenHash), nil for none.
func NewTopicAuth(st topicAuthStore, operatorTokenHash []byte) TopicAuth {
	return TopicAuth{st: st, operatorTokenHash: operatorTokenHash}
}

// AuthorizeTopic checks a subscribe to one of projectID's topics
// (spec/websub.md "Subscribing"): the request's bearer must be a token of
// that project with the read scope. Errors: hub.ErrUnauthorized (no valid
// bearer), hub.ErrNotFound (a token of another project), hub.ErrScope (no
// read scope, or the operator token: a subscription must name a project
// token whose revocation ends it), or the store's.
//
// A public project's topics behave as plain WebSub: public is true and no
// token is needed or recorded (an Authorization header is ignored).
func (a TopicAuth) AuthorizeTopic(r *http.Request, projectID string) (tokenID string, public bool, err error) {
	switch v, err := a.st.ProjectVisibility(r.Context(), projectID); {
	case err == nil && v == store.VisibilityPublic:
		return "", true, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return "", false, err
	}
	p, err := authenticate(r, a.st, a.operatorTokenHash)
	if err != nil {
		if isUnauthorized(err) {
			return "", false, hub.ErrUnauthorized
		}
		return "", false, err
	}
	switch {
	case p.Operator:
		return "", false, hub.ErrScope // a subscription needs a project token it can be denied with
	case p.ProjectID != projectID:
		return "", false, hub.ErrNotFound
	case !p.has(store.ScopeRead):
		return "", false, hub.ErrScope
	}
	return p.TokenID, false, nil
}

func marshalJSON(v any) ([]byte, error) {
	return json.Marshal(v, json.Deterministic(true))
}
