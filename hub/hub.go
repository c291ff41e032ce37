package hub

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// Store is what the hub needs from persistence: its subscriptions and
// pending verifications, and tokens (to see that the one behind a
// subscription was revoked). A store.Store is one.
type Store interface {
	store.WebSub
	store.WebSubLimits
	store.WebSubScans
	GetToken(ctx context.Context, id string) (store.Token, error)
}

// Authorization errors an Options.Authorize hook returns (spec/websub.md
// "Subscribing", private topics). The hub answers 401, 404 and 403 for
// them, before any outbound request.
var (
	// ErrUnauthorized: no bearer token, or one that is unknown, malformed
	// or revoked.
	ErrUnauthorized = errors.New("a valid bearer token of the topic's project is required")
	// ErrNotFound: the token belongs to another project (or names none);
	// nothing is said about the topic's project.
	ErrNotFound = errors.New("no such topic for this token")
	// ErrScope: the project's token lacks the read scope.
	ErrScope = errors.New("the token lacks the read scope")
)

// Modes of hub.mode (W3C WebSub #subscriber-sends-subscription-request,
// #subscription-validation).
const (
	ModeSubscribe   = "subscribe"
	ModeUnsubscribe = "unsubscribe"
	ModeDenied      = "denied"
	modePublish     = "publish"
)

// MaxSecretBytes bounds hub.secret: it must be shorter (W3C WebSub
// #subscriber-sends-subscription-request: "less than 200 bytes").
const MaxSecretBytes = 200

// maxFormBytes bounds a subscription request's body.
const maxFormBytes = 16 << 10

// Lease defaults (spec/websub.md "Subscribing": 1 h, 10 d, 10 d).
const (
	DefaultLeaseMin     = time.Hour
	DefaultLeaseDefault = 240 * time.Hour
	DefaultLeaseMax     = 240 * time.Hour
)

// Options configure a Hub; zero values take the defaults.
type Options struct {
	// PublicURL is the relay's public base URL (no trailing slash): topics
	// are hub.ParseTopic'd against it.
	PublicURL string
	// LeaseMin, LeaseDefault, LeaseMax bound the granted lease (W3C WebSub
	// #subscription-lease): a requested hub.lease_seconds is clamped to
	// [LeaseMin, LeaseMax], LeaseDefault when absent. Whole seconds;
	// defaults 1h, 240h, 240h.
	LeaseMin, LeaseDefault, LeaseMax time.Duration
	// Guard is the SSRF guard (spec/websub.md "SSRF defence") every
	// callback is checked by at subscribe time (CheckCallbackResolved) and
	// every verification and denial request dials through (its
	// HTTPClient). Nil means ssrf.NewGuard(ssrf.GuardOptions{}): no
	// allowlist. cmd builds it from --websub-allow-hosts and the relay's
	// own addresses.
	Guard  *ssrf.Guard
	Logger *slog.Logger
	// Authorize checks a subscribe request for projectID's topic: it
	// returns public true for a public project (no token needed; tokenID
	// may still name one the request carried), else the id of a token of
	// that project with the read scope. Its errors: ErrUnauthorized,
	// ErrNotFound, ErrScope, or a store error. Nil refuses every subscribe
	// with 401. The relay provides it (relay.TopicAuth.AuthorizeTopic).
	Authorize func(r *http.Request, projectID string) (tokenID string, public bool, err error)
	// Refresh is called with a project's id after its subscriptions
	// changed (couriers.Runner.Refresh of the WebSub courier). It must not
	// block.
	Refresh func(projectID string)
	// Production requires https callbacks (400 hub_callback_invalid, whose
	// message names the operator setting that lifts it). cmd sets it for a
	// relay published over https unless --websub-allow-http-callbacks.
	Production bool
	// Limits caps subscriptions and pending verifications (hub/limits.go);
	// zero values take the defaults.
	Limits Limits
	// OnRefused, when set, is called with the limit's name (Limit*) each
	// time a request is refused for a cap (the relay counts it in
	// /metrics). It must not block.
	OnRefused func(limit string)

	// Concurrency bounds the verification and denial requests in flight;
	// default 16.
	Concurrency int
	// RequestTimeout bounds one verification or denial request; default
	// 10s.
	RequestTimeout time.Duration
	// Poll is how often Run looks for pending verifications when nothing
	// woke it (another process's, a retry's); default 10s.
	Poll time.Duration
	// RetryInitial is the wait after a verification request's transport
	// error, doubling per attempt; default 5s.
	RetryInitial time.Duration
	// MaxAttempts is how many times a verification request is made before
	// it is given up after transport errors; default 3.
	MaxAttempts int
	// RevokedCheck is how often Run looks for subscriptions whose token
	// was revoked elsewhere (another process, the local CLI) and denies
	// them; default 1m, negative never.
	RevokedCheck time.Duration
	// RevokedCheckHeld, when set, says whether this process holds the
	// relay-wide lease of that scan (lease.Single Held): with several
	// processes on one database only the holder scans. nil scans here.
	RevokedCheckHeld func() bool
}

// Hub is the embedded W3C WebSub hub of this relay's topics. It is an
// http.Handler for POST /websub/hub; Run verifies intent in the
// background. New starts no goroutines.
type Hub struct {
	st     Store
	opt    Options
	log    *slog.Logger
	client *http.Client
	public string

	denyMu  sync.Mutex    // one deny at a time (deny.go)
	limits  Limits        // opt.Limits with defaults
	limitMu sync.Mutex    // held from a request's cap check to its AddVerification (limits.go)
	wake    chan struct{} // a verification was added
	denials chan denial   // denial notices to send (DenyRevoked)
}

// New returns a Hub over st.
func New(st Store, opt Options) *Hub {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.LeaseMin <= 0 {
		opt.LeaseMin = DefaultLeaseMin
	}
	if opt.LeaseMax <= 0 {
		opt.LeaseMax = DefaultLeaseMax
	}
	if opt.LeaseDefault <= 0 {
		opt.LeaseDefault = DefaultLeaseDefault
	}
	opt.LeaseMax = max(opt.LeaseMax, opt.LeaseMin)
	opt.LeaseDefault = min(max(opt.LeaseDefault, opt.LeaseMin), opt.LeaseMax)
	if opt.Concurrency <= 0 {
		opt.Concurrency = 16
	}
	if opt.RequestTimeout <= 0 {
		opt.RequestTimeout = 10 * time.Second
	}
	if opt.Poll <= 0 {
		opt.Poll = 10 * time.Second
	}
	if opt.RetryInitial <= 0 {
		opt.RetryInitial = 5 * time.Second
	}
	if opt.MaxAttempts <= 0 {
		opt.MaxAttempts = 3
	}
	if opt.RevokedCheck == 0 {
		opt.RevokedCheck = time.Minute
	}
	if opt.Guard == nil {
		opt.Guard, _ = ssrf.NewGuard(ssrf.GuardOptions{}) // the zero options always validate
	}
	return &Hub{st: st, opt: opt, limits: opt.Limits.withDefaults(), log: opt.Logger.With("component", "websub_hub"), client: opt.Guard.HTTPClient(),
		public: strings.TrimRight(opt.PublicURL, "/"),
		wake:   make(chan struct{}, 1), denials: make(chan denial, 256)}
}

// The hub's answers: rows of wire's error table, with the hub's own
// message where it says more (internal/apierror).
var (
	errMethod         = apierror.New(wire.CodeMethodNotAllowed).Say("the hub takes POST only")
	errContentType    = apierror.New(wire.CodeContentTypeUnsupported).Say("the body must be application/x-www-form-urlencoded")
	errBodyTooLarge   = apierror.New(wire.CodeBodyTooLarge).Say("the body exceeds 16384 bytes").WithHint("")
	errBodyUnreadable = apierror.New(wire.CodeBodyUnreadable).Say("the body could not be read")
	errForm           = apierror.New(wire.CodeBodyInvalid).Say("the body is not a valid form encoding")
	errRepeated       = apierror.New(wire.CodeHubParameterRepeated)
	errMode           = apierror.New(wire.CodeHubModeInvalid)
	errPublish        = apierror.New(wire.CodeHubPublishUnsupported)
	errTopic          = apierror.New(wire.CodeHubTopicInvalid)
	errCallback       = apierror.New(wire.CodeHubCallbackInvalid)
	// errCallbackLocal: the SSRF guard refused a loopback, private or
	// local-use callback (ssrf.ErrCallbackName, ssrf.ErrCallbackAddress). The message
	// names the operator's switch, since a subscriber testing on one
	// machine hits this first; it never echoes the callback.
	errCallbackLocal  = apierror.New(wire.CodeHubCallbackInvalid).Say("hub.callback is a loopback, private or local-use host, which this hub refuses (SSRF guard); for tests on one machine the relay's operator can allow it with --websub-allow-hosts (e.g. 127.0.0.1,localhost; env ACRELAY_WEBSUB_ALLOW_HOSTS)")
	errCallbackHTTPS  = apierror.New(wire.CodeHubCallbackInvalid).Say("hub.callback must be an https URL: this relay is published over https, and its operator has not allowed http callbacks (acrelay serve --websub-allow-http-callbacks)")
	errLease          = apierror.New(wire.CodeHubLeaseSecondsInvalid)
	errSecretRequired = apierror.New(wire.CodeHubSecretRequired)
	errSecretTooLong  = apierror.New(wire.CodeHubSecretInvalid)
	errUnauthorized   = apierror.New(wire.CodeUnauthorized).Say("a private topic needs the project's read token: Authorization: Bearer <token>")
	errNotFound       = apierror.New(wire.CodeNotFound)
	errScope          = apierror.New(wire.CodeScopeInsufficient).Say("the token lacks the read scope")
)

// request is a parsed subscription request.
type request struct {
	mode     string
	topic    Topic
	callback string
	lease    int64 // granted seconds (subscribe)
	secret   []byte
}

// ServeHTTP answers POST /websub/hub, a subscription request (W3C WebSub
// #subscriber-sends-subscription-request): a form with hub.mode
// (subscribe or unsubscribe), hub.topic, hub.callback, hub.lease_seconds
// and hub.secret. Unknown and legacy (hub.verify, hub.verify_token)
// parameters are ignored. An accepted request is exactly 202 Accepted and a
// stored store.Verification, which Run then verifies (#hub-verifies-intent);
// an unsubscribe of an unknown (topic, callback) is 202 and stores nothing.
// A private topic's subscribe is authorized before anything else is
// looked at beyond the form (spec/websub.md "Subscribing"), and no
// request leaves the relay for a refused one. Errors are JSON
// {"error","message"} with the codes of wire (hub_*, unauthorized 401,
// not_found 404, scope_insufficient 403, …).
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.serve(w, r); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return errMethod
	}
	req, err := h.parse(w, r)
	if err != nil {
		return err
	}
	v := store.Verification{ID: uuid.NewString(), ProjectID: req.topic.ProjectID, Mode: req.mode,
		Topic: req.topic.URL(h.public), RepositoryID: req.topic.RepositoryID, ThreadID: req.topic.ThreadID,
		Format: req.topic.Format, Callback: req.callback}
	if req.mode == ModeSubscribe {
		tokenID, public, err := h.authorize(r, req.topic.ProjectID)
		if err != nil {
			return err
		}
		if !public && len(req.secret) == 0 {
			return errSecretRequired
		}
		v.TokenID, v.Secret, v.LeaseSeconds = tokenID, req.secret, req.lease
	}
	// A request over a cap is refused before the callback's host name is
	// resolved (a flood costs no DNS); addVerification checks again, under
	// its lock, for the requests that pass.
	if req.mode == ModeSubscribe {
		if err := h.checkLimits(r.Context(), v); err != nil {
			return err
		}
	}
	// After the capability check: CheckCallback may resolve the
	// callback's host name.
	if err := h.checkCallback(r.Context(), req.callback); err != nil {
		return err
	}
	if req.mode == ModeUnsubscribe {
		// No capability: the callback's verification suffices, and an
		// unknown (topic, callback) leaves no state (spec/websub.md).
		known, err := h.subscribed(r.Context(), v.ProjectID, v.Topic, v.Callback)
		if err != nil || !known {
			return err
		}
	}
	if err := h.addVerification(r.Context(), v); err != nil {
		return err
	}
	h.log.DebugContext(r.Context(), "verification accepted", "project_id", v.ProjectID, "topic", v.Topic,
		"mode", v.Mode, "lease_seconds", v.LeaseSeconds, "callback_host", hostOf(v.Callback))
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return nil
}

// addVerification stores v unless it would take a topic, host or project
// past a cap (checkLimits).
func (h *Hub) addVerification(ctx context.Context, v store.Verification) error {
	h.limitMu.Lock()
	defer h.limitMu.Unlock()
	if err := h.checkLimits(ctx, v); err != nil {
		return err
	}
	return h.st.AddVerification(ctx, v)
}

// parse reads and checks the form; nothing in it makes an outbound
// request or reads the store.
func (h *Hub) parse(w http.ResponseWriter, r *http.Request) (request, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return request{}, errContentType
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return request{}, errBodyTooLarge
		}
		return request{}, errBodyUnreadable
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return request{}, errForm
	}
	for k, vs := range form {
		if strings.HasPrefix(k, "hub.") && len(vs) > 1 {
			return request{}, errRepeated
		}
	}
	var req request
	switch req.mode = form.Get("hub.mode"); req.mode {
	case ModeSubscribe, ModeUnsubscribe:
	case modePublish:
		return request{}, errPublish
	default:
		return request{}, errMode
	}
	if req.topic, err = ParseTopic(h.public, form.Get("hub.topic")); err != nil {
		return request{}, errTopic
	}
	req.callback = form.Get("hub.callback")
	if req.callback == "" {
		return request{}, errCallback
	}
	if req.lease, err = h.grantLease(form["hub.lease_seconds"]); err != nil {
		return request{}, err
	}
	if s := form.Get("hub.secret"); s != "" {
		if len(s) >= MaxSecretBytes {
			return request{}, errSecretTooLong
		}
		req.secret = []byte(s)
	}
	if req.mode == ModeUnsubscribe {
		req.lease, req.secret = 0, nil
	}
	return req, nil
}

// grantLease is the lease the hub grants (W3C WebSub
// #subscription-lease): LeaseDefault when hub.lease_seconds is absent,
// else the request clamped to [LeaseMin, LeaseMax]. A value that is not a
// non-negative decimal integer ("", "1.5", "-5", "abc", "+5") is an error.
func (h *Hub) grantLease(values []string) (int64, error) {
	lo, hi := int64(h.opt.LeaseMin/time.Second), int64(h.opt.LeaseMax/time.Second)
	if len(values) == 0 {
		return int64(h.opt.LeaseDefault / time.Second), nil
	}
	s := values[0]
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errLease
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // only digits: out of range, so above any maximum
		n = hi
	}
	return min(max(n, lo), hi), nil
}

func (h *Hub) authorize(r *http.Request, projectID string) (string, bool, error) {
	if h.opt.Authorize == nil {
		return "", false, errUnauthorized
	}
	tokenID, public, err := h.opt.Authorize(r, projectID)
	switch {
	case err == nil:
		if !public && tokenID == "" {
			return "", false, errUnauthorized
		}
		return tokenID, public, nil
	case errors.Is(err, ErrUnauthorized):
		return "", false, errUnauthorized
	case errors.Is(err, ErrNotFound):
		return "", false, errNotFound
	case errors.Is(err, ErrScope):
		return "", false, errScope
	}
	return "", false, err
}

// checkCallback checks hub.callback before anything is stored: the SSRF
// guard's CheckCallbackResolved (a literal or resolved refused address; no
// request is made for a refused one), https in production.
func (h *Hub) checkCallback(ctx context.Context, raw string) error {
	u, err := h.opt.Guard.CheckCallbackResolved(ctx, raw)
	switch {
	case errors.Is(err, ssrf.ErrCallbackName), errors.Is(err, ssrf.ErrCallbackAddress):
		return errCallbackLocal
	case err != nil:
		return errCallback
	}
	if h.opt.Production && u.Scheme != "https" {
		return errCallbackHTTPS
	}
	return nil
}

// subscribed reports whether (topic, callback) has a live subscription:
// one indexed lookup (store.WebSubLimits CountWebSub), not the project's
// whole list.
func (h *Hub) subscribed(ctx context.Context, projectID, topic, callback string) (bool, error) {
	c, err := h.st.CountWebSub(ctx, projectID, topic, callback)
	return c.Subscribed, err
}

// writeError ends a hub request with err's answer through the relay's one
// error writer (apierror.Write): the same body, WWW-Authenticate and
// Retry-After as every relay route.
func (h *Hub) writeError(w http.ResponseWriter, r *http.Request, err error) {
	he, ok := apierror.From(err)
	switch {
	case !ok:
		h.log.ErrorContext(r.Context(), "hub request failed", "err", err)
	case he.Code == wire.CodeUnavailable:
		h.log.WarnContext(r.Context(), "hub request failed", "err", err)
	case he.Code == wire.CodeHubHostVerificationsLimit:
		he = he.WithRetryAfter(h.pendingRetryAfter())
	}
	apierror.Write(w, r, he)
}

// hostOf is a callback's host for logs: a callback URL's path and query
// may carry the subscriber's own secrets.
func hostOf(callback string) string {
	u, err := url.Parse(callback)
	if err != nil {
		return ""
	}
	return u.Host
}

func (h *Hub) refresh(projectID string) {
	if h.opt.Refresh != nil {
		h.opt.Refresh(projectID)
	}
}
