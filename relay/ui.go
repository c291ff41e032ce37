package relay

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/internal/apierror"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/wire"
)

// The live web view (docs/http.md "Live web view"): a server-rendered page of one
// repository's active claims, conflicts and recent events, kept current by
// an SSE stream of invalidations on which a small script re-fetches the
// server-rendered fragment.
//
// Access is a read token entered once in the sign-in form (POST body only,
// never a URL, never logged). The browser then holds a session cookie whose
// value is a random session token (256 bits); the sessions live in the
// store (store.UISessions) under the token's SHA-256, so any relay process
// on the store serves a signed-in page and a restart signs nobody out. A
// session remembers the read token's id, never the token, and re-checks on
// every request that it is still unrevoked. The sign-out form's CSRF value
// is derived from the session token (a domain-separated SHA-256), so it is
// neither stored nor the same in two sessions.
// Feed capability links (?feed=) are not accepted: the capability would sit
// in the address bar, the history and any proxy's access log.

//go:embed ui
var uiFiles embed.FS

var uiTemplates = template.Must(template.New("ui").Funcs(template.FuncMap{
	"remaining": uiRemaining,
}).ParseFS(uiFiles, "ui/templates/*.html"))

// UI settings.
const (
	uiSessionCookie   = "acrelay_ui_session"
	uiSigninCookie    = "acrelay_ui_signin" // the sign-in form's CSRF value, before any session
	uiSessionLifetime = 12 * time.Hour
	uiSigninLifetime  = 30 * time.Minute
	uiMaxStreams      = 4 // live streams per session
	uiTokenMaxBytes   = 512
	uiFormMaxBytes    = 4096
	// uiCSP is the Content-Security-Policy of every UI response: scripts,
	// styles and connections from this origin only, no inline script or
	// style, no framing, forms post only here.
	uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

// uiSession is one signed-in browser: the read token's id and project,
// never the token itself.
type uiSession struct {
	key       string // the session token's SHA-256, hex: this process's stream count
	hash      []byte // the session token's SHA-256, as stored
	projectID string
	tokenID   string
	csrf      string
}

// uiSessionHash is what the store keeps of a session token.
func uiSessionHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// uiCSRF is the sign-out form's CSRF value of a session token: bound to
// the session, and not the hash the store keeps.
func uiCSRF(token string) string {
	h := sha256.Sum256([]byte("acrelay ui csrf\x00" + token))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// uiViews serves the /ui routes of one Server.
type uiViews struct {
	s      *Server
	static http.Handler

	mu       sync.Mutex
	streams  map[string]int // session key → live streams in this process
	done     chan struct{}  // closed by closeStreams (graceful shutdown)
	doneOnce sync.Once
	now      func() time.Time
}

func newUI(s *Server) *uiViews {
	sub, err := fs.Sub(uiFiles, "ui/static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return &uiViews{s: s, static: http.StripPrefix("/ui/static/", http.FileServerFS(sub)),
		streams: make(map[string]int), done: make(chan struct{}), now: time.Now}
}

// closeStreams ends every open live stream (Server.CloseStreams).
func (u *uiViews) closeStreams() { u.doneOnce.Do(func() { close(u.done) }) }

// uiHeaders sets the security headers of every UI response.
func uiHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// uiMiddleware sets the security headers and refuses any request whose
// query carries a token: a token in a URL is already leaked, so it is
// neither used nor echoed.
func (u *uiViews) uiMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		if q, err := url.ParseQuery(r.URL.RawQuery); err != nil || q.Has("token") || q.Has("feed") {
			u.renderError(w, r, apierror.New(wire.CodeQueryInvalid).Say("A token or capability never goes in a URL: sign in with the form. If this URL was shared, revoke that token."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func randomID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (u *uiViews) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(u.s.public, "https://")
}

func (u *uiViews) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/ui", HttpOnly: true, Secure: u.secure(r), SameSite: http.SameSiteStrictMode}
	if maxAge > 0 {
		c.MaxAge = int(maxAge / time.Second)
	} else {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// crossSite reports a request a browser marked as coming from another
// site (Fetch Metadata): refused before any CSRF check.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	}
	return false
}

func sameSecret(a, b string) bool {
	return a != "" && len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// session returns the request's live session: stored, not expired, and
// its token still unrevoked (a revoked token ends the session at once). A
// store that cannot answer signs nobody in.
func (u *uiViews) session(r *http.Request) (*uiSession, bool) {
	c, err := r.Cookie(uiSessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return nil, false
	}
	hash := uiSessionHash(c.Value)
	st, err := u.s.st.UISession(r.Context(), hash)
	if err != nil {
		if !isNotFound(err) {
			u.s.log.WarnContext(r.Context(), "ui session read failed", "err", err)
		}
		return nil, false
	}
	sess := &uiSession{key: hex.EncodeToString(hash), hash: hash, projectID: st.ProjectID, tokenID: st.TokenID, csrf: uiCSRF(c.Value)}
	if !u.now().Before(st.ExpiresAt) || !u.tokenLive(r.Context(), sess) {
		u.drop(r.Context(), sess)
		return nil, false
	}
	return sess, true
}

// tokenLive re-reads the session's token; a store error keeps the session.
func (u *uiViews) tokenLive(ctx context.Context, sess *uiSession) bool {
	t, err := u.s.st.GetToken(ctx, sess.tokenID)
	return !(isNotFound(err) || err == nil && t.Revoked)
}

// drop ends a session in the store (expired ones that nobody drops are
// deleted by housekeeping).
func (u *uiViews) drop(ctx context.Context, sess *uiSession) {
	if err := u.s.st.DeleteUISession(ctx, sess.hash); err != nil {
		u.s.log.WarnContext(ctx, "ui session delete failed", "err", err)
	}
}

type uiSigninPage struct {
	CSRF         string
	RepositoryID string
	Error        string
}

// handleSignInForm: GET /ui/signin[?repository_id=R] → 200, the sign-in
// form, with a fresh sign-in CSRF value in a SameSite=Strict cookie and in
// the form.
func (u *uiViews) handleSignInForm(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		u.renderError(w, r, apierror.New(wire.CodeQueryInvalid).Say("The query string is malformed."))
		return
	}
	repo := q.Get("repository_id")
	if repo != "" && !correspondence.ValidOpaqueID(repo) {
		repo = ""
	}
	csrf := randomID()
	u.setCookie(w, r, uiSigninCookie, csrf, uiSigninLifetime)
	u.render(w, r, http.StatusOK, "signin", uiSigninPage{CSRF: csrf, RepositoryID: repo})
}

// handleSignIn: POST /ui/signin (form: token, repository_id, csrf) → 303 to
// the project page with a new session cookie; 401 with the form again when
// the token is refused; 403 for a cross-site post or a CSRF mismatch; 400
// for a malformed form.
func (u *uiViews) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		u.renderError(w, r, apierror.New(wire.CodeCrossSiteRefused).Say("Cross-site requests are refused."))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, uiFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		u.renderError(w, r, apierror.New(wire.CodeFormInvalid).Say("The form could not be read."))
		return
	}
	c, err := r.Cookie(uiSigninCookie)
	if err != nil || !sameSecret(c.Value, r.PostForm.Get("csrf")) {
		u.renderError(w, r, apierror.New(wire.CodeFormTokenInvalid).Say("The sign-in form expired or did not come from this relay: open it again."))
		return
	}
	repo := strings.TrimSpace(r.PostForm.Get("repository_id"))
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	again := func(status int, msg string) {
		csrf := randomID()
		u.setCookie(w, r, uiSigninCookie, csrf, uiSigninLifetime)
		u.render(w, r, status, "signin", uiSigninPage{CSRF: csrf, RepositoryID: repo, Error: msg})
	}
	if !correspondence.ValidOpaqueID(repo) {
		again(http.StatusBadRequest, "Enter a valid repository id.")
		return
	}
	if tok == "" || len(tok) > uiTokenMaxBytes {
		again(http.StatusUnauthorized, "That token was not accepted.")
		return
	}
	ar := r.Clone(r.Context())
	ar.Header = http.Header{"Authorization": {"Bearer " + tok}}
	p, err := u.s.authenticate(ar)
	switch {
	case err == nil && p.Operator:
		again(http.StatusForbidden, "The operator token cannot sign in here: use a read token of the project.")
		return
	case err == nil && !p.has(store.ScopeRead):
		again(http.StatusForbidden, "That token lacks the read scope.")
		return
	case err != nil:
		if !isUnauthorized(err) {
			u.s.log.WarnContext(r.Context(), "ui sign-in: token check failed", "err", err)
			u.renderError(w, r, apierror.New(wire.CodeUnavailable).Say("The relay cannot check tokens right now; try again."))
			return
		}
		again(http.StatusUnauthorized, "That token was not accepted.")
		return
	}
	token, now := randomID(), u.now()
	if err := u.s.st.CreateUISession(r.Context(), store.UISession{Hash: uiSessionHash(token), ProjectID: p.ProjectID, TokenID: p.TokenID,
		CreatedAt: now, ExpiresAt: now.Add(uiSessionLifetime)}); err != nil {
		u.s.log.WarnContext(r.Context(), "ui sign-in: session not stored", "err", err)
		u.renderError(w, r, apierror.New(wire.CodeUnavailable).Say("The relay cannot sign you in right now; try again."))
		return
	}
	u.s.log.InfoContext(r.Context(), "ui session created", "project_id", p.ProjectID, "token_id", p.TokenID)
	u.setCookie(w, r, uiSigninCookie, "", 0)
	u.setCookie(w, r, uiSessionCookie, token, uiSessionLifetime)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, uiProjectPath(p.ProjectID, repo), http.StatusSeeOther)
}

// handleSignOut: POST /ui/signout (form: csrf) → 303 to the sign-in form,
// the session ended and its cookie cleared; 403 without the session's CSRF
// value or for a cross-site post.
func (u *uiViews) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		u.renderError(w, r, apierror.New(wire.CodeCrossSiteRefused).Say("Cross-site requests are refused."))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, uiFormMaxBytes)
	if err := r.ParseForm(); err != nil {
		u.renderError(w, r, apierror.New(wire.CodeFormInvalid).Say("The form could not be read."))
		return
	}
	sess, ok := u.session(r)
	if !ok {
		u.setCookie(w, r, uiSessionCookie, "", 0)
		http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
		return
	}
	if !sameSecret(sess.csrf, r.PostForm.Get("csrf")) {
		u.renderError(w, r, apierror.New(wire.CodeFormTokenInvalid).Say("The form did not come from this session."))
		return
	}
	u.drop(r.Context(), sess)
	u.setCookie(w, r, uiSessionCookie, "", 0)
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

func uiProjectPath(projectID, repo string) string {
	return "/ui/projects/" + url.PathEscape(projectID) + "?repository_id=" + url.QueryEscape(repo)
}

// projectRequest resolves a project view's session and repository. ok is
// false when the answer was written: 303 to the sign-in form (pages) or 401
// (fragment, stream, records) without a session; 404 for another project;
// 400 for a bad repository_id or unknown parameters.
func (u *uiViews) projectRequest(w http.ResponseWriter, r *http.Request, page bool, extra ...string) (sess *uiSession, repo string, q map[string]string, ok bool) {
	q, err := readQuery(r, append([]string{"repository_id"}, extra...)...)
	if err != nil {
		u.renderError(w, r, apierror.New(wire.CodeQueryInvalid).Say("Unknown or repeated query parameters."))
		return nil, "", nil, false
	}
	repo = q["repository_id"]
	sess, signed := u.session(r)
	if !signed {
		if page {
			to := "/ui/signin"
			if correspondence.ValidOpaqueID(repo) {
				to += "?repository_id=" + url.QueryEscape(repo)
			}
			w.Header().Set("Cache-Control", "no-store")
			http.Redirect(w, r, to, http.StatusSeeOther)
			return nil, "", nil, false
		}
		u.renderError(w, r, apierror.New(wire.CodeUnauthorized).Say("Sign in first."))
		return nil, "", nil, false
	}
	if mux.Vars(r)["project_id"] != sess.projectID {
		u.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such project for this session."))
		return nil, "", nil, false
	}
	if !correspondence.ValidOpaqueID(repo) {
		u.renderError(w, r, apierror.New(wire.CodeRepositoryIDInvalid).Say("repository_id is missing or not a valid opaque id."))
		return nil, "", nil, false
	}
	return sess, repo, q, true
}

// handleProject: GET /ui/projects/{project_id}?repository_id=R → 200, the
// whole page.
func (u *uiViews) handleProject(w http.ResponseWriter, r *http.Request) {
	sess, repo, _, ok := u.projectRequest(w, r, true)
	if !ok {
		return
	}
	v, err := u.view(r.Context(), sess, repo)
	if err != nil {
		u.viewError(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "page", v)
}

// handleFragment: GET /ui/projects/{project_id}/fragment?repository_id=R →
// 200, the live part of the page (what the script swaps in).
func (u *uiViews) handleFragment(w http.ResponseWriter, r *http.Request) {
	sess, repo, _, ok := u.projectRequest(w, r, false)
	if !ok {
		return
	}
	v, err := u.view(r.Context(), sess, repo)
	if err != nil {
		u.viewError(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "fragment", v)
}

// handleRecord: GET /ui/projects/{project_id}/records/{received_seq}?repository_id=R
// → 200, the record's immutable {event, receipt} JSON (the bytes the events
// API serves for it); 404 when that received_seq is not a record of the
// repository.
func (u *uiViews) handleRecord(w http.ResponseWriter, r *http.Request) {
	sess, repo, _, ok := u.projectRequest(w, r, false)
	if !ok {
		return
	}
	seq, okSeq := parseSeq(mux.Vars(r)["received_seq"])
	if !okSeq || seq < 1 {
		u.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such record."))
		return
	}
	recs, err := u.s.st.RecordsAfter(r.Context(), sess.projectID, seq-1, 1)
	if err != nil {
		u.viewError(w, r, err)
		return
	}
	if len(recs) == 0 || recs[0].ReceivedSeq != seq || recs[0].RepositoryID != repo {
		u.renderError(w, r, apierror.New(wire.CodeNotFound).Say("No such record."))
		return
	}
	w.Header().Set("Cache-Control", "private, no-cache")
	u.s.writeBytes(w, r, http.StatusOK, mediaJSON, RecordJSON(recs[0]))
}

// handleLive: GET /ui/projects/{project_id}/live?repository_id=R → an SSE
// stream of "invalidate" frames (data: the project's newest received_seq)
// whenever the project advances, and a heartbeat comment. It follows the
// store's advances (SubscribeAdvances, the source of the wake fan-out) for
// this session's project only; frames carry no event data. 429 beyond
// uiMaxStreams per session.
func (u *uiViews) handleLive(w http.ResponseWriter, r *http.Request) {
	sess, _, _, ok := u.projectRequest(w, r, false)
	if !ok {
		return
	}
	u.mu.Lock()
	if u.streams[sess.key] >= uiMaxStreams {
		u.mu.Unlock()
		u.renderError(w, r, apierror.New(wire.CodeTooManyStreams).Say("Too many live streams for this session."))
		return
	}
	u.streams[sess.key]++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		if u.streams[sess.key]--; u.streams[sess.key] <= 0 {
			delete(u.streams, sess.key)
		}
		u.mu.Unlock()
	}()

	sub := u.s.st.SubscribeAdvances()
	defer sub.Close()
	h := w.Header()
	h.Set("Content-Type", mediaEventStream)
	h.Set("Cache-Control", wakeCacheControl)
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	if err := u.s.flushWake(rc, func() error { _, err := w.Write([]byte("retry: 2000\n\n")); return err }); err != nil {
		return
	}
	ticker := time.NewTicker(u.s.wakeHeartbeat())
	defer ticker.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-u.done:
			return
		case <-sub.Ready():
			for _, a := range sub.Take() {
				if a.ProjectID != sess.projectID {
					continue
				}
				frame := "event: invalidate\ndata: " + strconv.FormatInt(a.ReceivedSeq, 10) + "\n\n"
				err = u.s.flushWake(rc, func() error { _, err := w.Write([]byte(frame)); return err })
			}
		case <-ticker.C:
			if _, ok := u.session(r); !ok {
				return // signed out, expired or revoked: the script's re-fetch gets 401
			}
			err = u.s.flushWake(rc, func() error { _, err := w.Write([]byte(wakeHeartbeatLine)); return err })
		}
		if err != nil {
			u.s.log.DebugContext(r.Context(), "ui live stream ended", "project_id", sess.projectID, "err", err)
			return
		}
	}
}

// handleStatic: GET /ui/static/{file} → the embedded stylesheet and script.
func (u *uiViews) handleStatic(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	u.static.ServeHTTP(w, r)
}

// render executes one template into a buffer, so a template error is a 500
// and never half a page.
func (u *uiViews) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var b bytes.Buffer
	if err := uiTemplates.ExecuteTemplate(&b, name, data); err != nil {
		u.s.log.ErrorContext(r.Context(), "ui render", "template", name, "err", err)
		status, b = http.StatusInternalServerError, *bytes.NewBufferString("internal error\n")
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-store")
	}
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b.Bytes())
	}
}

// uiErrorPage is the web view's rendering of an error answer: the same
// status and code as the JSON API would answer, and a message for people.
type uiErrorPage struct {
	Status  int
	Title   string
	Code    string
	Message string
}

// renderError ends a web-view request with e as an HTML page, through the
// relay's one error writer (apierror.WriteHTML: e's status and headers).
func (u *uiViews) renderError(w http.ResponseWriter, r *http.Request, e *apiError) {
	var b bytes.Buffer
	page := uiErrorPage{Status: e.Status, Title: http.StatusText(e.Status), Code: e.Code, Message: e.Message}
	if err := uiTemplates.ExecuteTemplate(&b, "error", page); err != nil {
		u.s.log.ErrorContext(r.Context(), "ui render", "template", "error", "err", err)
		e, b = errInternal, *bytes.NewBufferString("internal error\n")
	}
	apierror.WriteHTML(w, r, e, b.Bytes())
}

// viewError renders err as the JSON API answers it (toAPIError: the same
// status and code), in the view's words for the two a reader meets: a
// project that is not there, and a store that cannot be read now.
func (u *uiViews) viewError(w http.ResponseWriter, r *http.Request, err error) {
	ae := u.s.toAPIError(r, err)
	switch ae.Code {
	case wire.CodeNotFound:
		ae = ae.Say("No such project.")
	case wire.CodeUnavailable, wire.CodeCorrespondenceReadUnavailable, wire.CodeCorrespondenceProjectionUnavailable:
		u.s.log.WarnContext(r.Context(), "ui read failed", "err", err)
		ae = ae.Say("The relay cannot read this project right now; try again.")
	}
	u.renderError(w, r, ae)
}

// The view model: plain strings only; html/template escapes every one of
// them in its context.

type uiView struct {
	ProjectID, RepositoryID, TokenID, CSRF string
	FragmentURL, LiveURL, SigninURL        string
	EvaluatedAt, Cursor, Status            string
	Now                                    time.Time
	Claims                                 []uiClaim
	Overlaps                               []uiOverlap
	Forks                                  []uiFork
	Missing                                []uiMissing
	Events                                 []uiEvent
	Truncated                              bool
}

type uiClaim struct {
	ClaimID, EventID, Owner, OwnerID, ThreadID string
	Generation                                 int64
	Paths                                      []string
	ExpiresAt                                  time.Time
	Conflicted, Overlapping                    bool
	Competing                                  []string
}

// uiOverlap is a pair of overlapping active claims, each named by its
// owner and claim id (the event id only in a tooltip).
type uiOverlap struct {
	Left, Right uiClaimRef
	Paths       []string
}

// uiClaimRef names one active claim as a person reads it.
type uiClaimRef struct{ Owner, ClaimID, EventID string }

// uiEventRef names an event by its place in the log when the recent
// window holds it ("#12 claim.renew"), else by its id.
type uiEventRef struct{ Label, EventID string }

type uiFork struct {
	Owner, DeviceID, SessionID string
	SessionSeq                 int64
	Events                     []uiEventRef
}

type uiMissing struct {
	Event   uiEventRef
	Parents []string
}

type uiEvent struct {
	Seq                        int64
	EventID, Kind, Summary     string
	Sender, SenderID, ThreadID string
	ReceivedAt                 time.Time
	Paths                      []string
	Artifacts                  []uiArtifact
	JSONURL, APIURL            string
	PageURL                    string // the record's page (relay/recordpage.go)
	Lineage                    string
	Conflict                   bool
}

type uiArtifact struct{ Kind, Ref, Locator string }

// uiEventJSON is the part of a stored event the timeline shows.
type uiEventJSON struct {
	Kind   string `json:"kind"`
	Sender struct {
		IdentityID string `json:"identity_id"`
	} `json:"sender"`
	Scope struct {
		Paths []string `json:"paths"`
	} `json:"scope"`
	Body struct {
		Summary        string          `json:"summary"`
		Detail         string          `json:"detail"`
		NextSafeAction string          `json:"next_safe_action"`
		ClaimID        string          `json:"claim_id"`
		Generation     int64           `json:"generation"`
		ExpiresAt      string          `json:"expires_at"`
		Until          *string         `json:"until"`
		TargetEventID  string          `json:"target_event_id"`
		TargetEventIDs []string        `json:"target_event_ids"`
		ResultRevision string          `json:"result_revision"`
		Artifact       *uiArtifactJSON `json:"artifact"`
	} `json:"body"`
}

type uiArtifactJSON struct {
	Kind     string `json:"kind"`
	Revision string `json:"revision"`
	Digest   string `json:"digest"`
	Locator  string `json:"locator"`
}

// view reads the voice snapshot of (project, repository) into the model.
func (u *uiViews) view(ctx context.Context, sess *uiSession, repo string) (*uiView, error) {
	pid := sess.projectID
	u.s.reconcileForRead(ctx, pid)
	snap, err := u.s.st.VoiceSnapshot(ctx, store.VoiceQuery{ProjectID: pid, RepositoryID: repo})
	if err != nil {
		return nil, err
	}
	names := make(map[string]string)
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		n := id
		if ident, err := u.s.st.GetIdentity(ctx, pid, id); err == nil && ident.DisplayName != "" {
			n = ident.DisplayName + " (" + id[:min(8, len(id))] + ")"
		}
		names[id] = n
		return n
	}
	base := "/ui/projects/" + url.PathEscape(pid)
	rq := "?repository_id=" + url.QueryEscape(repo)
	v := &uiView{
		ProjectID: pid, RepositoryID: repo, TokenID: sess.tokenID, CSRF: sess.csrf,
		FragmentURL: base + "/fragment" + rq, LiveURL: base + "/live" + rq, SigninURL: "/ui/signin" + rq,
		EvaluatedAt: evaluatedAt(snap.ClaimsSnapshot), Status: statusOf(snap.Truncated || snap.RecentTruncated || snap.LineageIncomplete, len(snap.Unavailable) > 0),
		Now:       u.now(),
		Truncated: snap.Truncated || snap.LineageIncomplete,
	}
	if c := cursorOf(snap.Head); c != nil {
		v.Cursor = *c
	}
	conflicted := make(map[string]bool)
	claimOf := make(map[string]uiClaimRef, len(snap.Claims))
	for _, c := range snap.Claims {
		claimOf[c.EventID] = uiClaimRef{Owner: name(c.RootIdentityID), ClaimID: c.ClaimID, EventID: c.EventID}
	}
	claimRef := func(eventID string) uiClaimRef {
		if c, ok := claimOf[eventID]; ok {
			return c
		}
		return uiClaimRef{Owner: "an unknown owner", ClaimID: eventID, EventID: eventID}
	}
	recentOf := make(map[string]store.Record, len(snap.Recent))
	for _, rec := range snap.Recent {
		recentOf[rec.EventID] = rec
	}
	eventRef := func(eventID string) uiEventRef {
		if rec, ok := recentOf[eventID]; ok {
			return uiEventRef{Label: "#" + strconv.FormatInt(rec.ReceivedSeq, 10) + " " + string(rec.Kind), EventID: eventID}
		}
		return uiEventRef{Label: eventID, EventID: eventID}
	}
	for _, c := range snap.Claims {
		var scope struct {
			Paths []string `json:"paths"`
		}
		_ = json.Unmarshal(c.Scope, &scope)
		v.Claims = append(v.Claims, uiClaim{ClaimID: c.ClaimID, EventID: c.EventID, Owner: name(c.RootIdentityID), OwnerID: c.RootIdentityID,
			ThreadID: c.ThreadID, Generation: c.Generation, Paths: scope.Paths, ExpiresAt: c.ExpiresAt,
			Conflicted: len(c.CompetingEventIDs) > 0, Competing: c.CompetingEventIDs})
		if len(c.CompetingEventIDs) > 0 {
			conflicted[c.EventID] = true
		}
	}
	overlaps, _ := overlappingClaims(snap.Claims)
	for _, o := range overlaps {
		v.Overlaps = append(v.Overlaps, uiOverlap{Left: claimRef(o.LeftEventID), Right: claimRef(o.RightEventID), Paths: o.Paths})
		conflicted[o.LeftEventID], conflicted[o.RightEventID] = true, true
	}
	for i := range v.Claims {
		v.Claims[i].Overlapping = conflicted[v.Claims[i].EventID] && !v.Claims[i].Conflicted
	}
	for _, f := range snap.SessionForks {
		fork := uiFork{Owner: name(f.IdentityID), DeviceID: f.DeviceID, SessionID: f.SessionID, SessionSeq: f.SessionSeq}
		for _, id := range f.EventIDs {
			conflicted[id] = true
			fork.Events = append(fork.Events, eventRef(id))
		}
		v.Forks = append(v.Forks, fork)
	}
	for _, rec := range snap.Recent {
		if len(rec.MissingParents) > 0 {
			v.Missing = append(v.Missing, uiMissing{Event: eventRef(rec.EventID), Parents: rec.MissingParents})
			conflicted[rec.EventID] = true
		}
	}
	for _, rec := range snap.Recent {
		var ev uiEventJSON
		_ = json.Unmarshal(rec.Event, &ev)
		e := uiEvent{Seq: rec.ReceivedSeq, EventID: rec.EventID, Kind: string(rec.Kind), Summary: eventSummary(ev),
			Sender: name(ev.Sender.IdentityID), SenderID: ev.Sender.IdentityID, ThreadID: rec.ThreadID, ReceivedAt: rec.ReceivedAt,
			Paths:   ev.Scope.Paths,
			JSONURL: base + "/records/" + strconv.FormatInt(rec.ReceivedSeq, 10) + rq,
			APIURL: "/v1/correspondence/events?" + repoQuery(rec.RepositoryID, rec.ThreadID) +
				"&after=" + strconv.FormatInt(rec.ReceivedSeq-1, 10) + "&limit=1",
			Lineage:  string(rec.LineageStatus),
			Conflict: conflicted[rec.EventID] || rec.Kind == correspondence.KindConflictRaise,
		}
		e.PageURL = base + "/records/" + strconv.FormatInt(rec.ReceivedSeq, 10) + ".html" + rq
		if a := ev.Body.Artifact; a != nil {
			ref := a.Revision
			if ref == "" {
				ref = a.Digest
			}
			e.Artifacts = append(e.Artifacts, uiArtifact{Kind: a.Kind, Ref: ref, Locator: a.Locator})
		}
		if ev.Body.ResultRevision != "" {
			e.Artifacts = append(e.Artifacts, uiArtifact{Kind: "result_revision", Ref: ev.Body.ResultRevision})
		}
		v.Events = append(v.Events, e)
	}
	sort.SliceStable(v.Claims, func(i, j int) bool { return v.Claims[i].ExpiresAt.Before(v.Claims[j].ExpiresAt) })
	return v, nil
}

// eventSummary is the one line the timeline shows for an event: its own
// text when it has some, else what its body says in words.
func eventSummary(ev uiEventJSON) string {
	b := ev.Body
	for _, s := range []string{b.Summary, b.Detail} {
		if s != "" {
			if b.NextSafeAction != "" {
				return s + " — next: " + b.NextSafeAction
			}
			return s
		}
	}
	switch {
	case b.ClaimID != "" && b.ExpiresAt != "":
		return "claim " + b.ClaimID + " generation " + strconv.FormatInt(b.Generation, 10) + " until " + b.ExpiresAt
	case b.ClaimID != "":
		return "claim " + b.ClaimID + " released (generation " + strconv.FormatInt(b.Generation, 10) + ")"
	case b.TargetEventID != "":
		return "on " + b.TargetEventID
	case len(b.TargetEventIDs) > 0:
		return "on " + strings.Join(b.TargetEventIDs, ", ")
	case b.Until != nil:
		return "until " + *b.Until
	}
	return ""
}

// uiRemaining is the server-rendered countdown text (the script then
// updates it every second).
func uiRemaining(now, at time.Time) string {
	d := at.Sub(now).Round(time.Second)
	if d <= 0 {
		return "expired"
	}
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	switch {
	case h > 0:
		return "in " + strconv.Itoa(h) + "h " + strconv.Itoa(m) + "m"
	case m > 0:
		return "in " + strconv.Itoa(m) + "m " + strconv.Itoa(s) + "s"
	}
	return "in " + strconv.Itoa(s) + "s"
}
