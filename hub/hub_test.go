package hub_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/google/uuid"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
	"github.com/acrelay/acrelay/wire"
)

const pub = "https://relay.example"

var bg = context.Background()

// callback is a subscriber's callback endpoint at 127.0.0.1 that records
// every request and answers as answer says.
type callback struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []url.Values
	raw []string
	// answer returns the status and body for a request's query; nil echoes
	// hub.challenge with 200.
	answer  func(q url.Values) (int, string)
	release chan struct{} // non-nil: requests wait for it to close
}

func newCallback(t *testing.T) *callback {
	t.Helper()
	c := &callback{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.got = append(c.got, r.URL.Query())
		c.raw = append(c.raw, r.URL.RawQuery)
		answer, release := c.answer, c.release
		c.mu.Unlock()
		if release != nil {
			<-release
		}
		status, body := http.StatusOK, r.URL.Query().Get("hub.challenge")
		if answer != nil {
			status, body = answer(r.URL.Query())
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *callback) url(path string) string { return c.srv.URL + path }

func (c *callback) requests() []url.Values {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *callback) setAnswer(f func(q url.Values) (int, string)) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

// env is a hub over a real SQLite store with one private project (tokens
// read, appendOnly), one public project and another project (other).
type env struct {
	t                       *testing.T
	path                    string
	st                      store.Store
	h                       *hub.Hub
	pid, publicPID          string
	read, appendOnly, alien string
	refreshMu               sync.Mutex
	refreshed               []string
}

func newEnv(t *testing.T, opt hub.Options) *env {
	t.Helper()
	e := &env{t: t, path: filepath.Join(t.TempDir(), "acrelay.db")}
	e.st = e.open()
	e.pid = e.project()
	e.publicPID = e.project()
	other := e.project()
	e.read = e.token(e.pid, store.ScopeRead, store.ScopeAppend)
	e.appendOnly = e.token(e.pid, store.ScopeAppend)
	e.alien = e.token(other, store.ScopeRead)
	e.h = e.newHub(opt)
	return e
}

func (e *env) open() store.Store {
	e.t.Helper()
	db, err := sqlite.Open(bg, e.path, slog.New(slog.DiscardHandler))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	return db
}

func (e *env) project() string {
	e.t.Helper()
	p, err := e.st.CreateProject(bg, uuid.NewString())
	if err != nil {
		e.t.Fatal(err)
	}
	return p.ID
}

func (e *env) token(pid string, scopes ...string) string {
	e.t.Helper()
	id := uuid.NewString()
	h := sha256.Sum256([]byte(id))
	if _, err := e.st.CreateToken(bg, store.Token{ID: id, ProjectID: pid, Scopes: scopes, Hash: h[:]}); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// authorize stands in for relay.Server.AuthorizeTopic: the bearer is the
// token id itself; publicPID is public.
func (e *env) authorize(r *http.Request, projectID string) (string, bool, error) {
	if projectID == e.publicPID {
		return "", true, nil
	}
	id, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "", false, hub.ErrUnauthorized
	}
	t, err := e.st.GetToken(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Revoked) {
		return "", false, hub.ErrUnauthorized
	}
	if err != nil {
		return "", false, err
	}
	if t.ProjectID != projectID {
		return "", false, hub.ErrNotFound
	}
	if !slices.Contains(t.Scopes, store.ScopeRead) {
		return "", false, hub.ErrScope
	}
	return t.ID, false, nil
}

func (e *env) newHub(opt hub.Options) *hub.Hub { return e.newHubOn(e.st, opt) }

// newHubOn is newHub over st (a wrapper of e.st).
func (e *env) newHubOn(st hub.Store, opt hub.Options) *hub.Hub {
	opt.PublicURL = pub
	g, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: []string{"127.0.0.1"}})
	if err != nil {
		e.t.Fatal(err)
	}
	opt.Guard = g
	opt.Logger = slog.New(slog.DiscardHandler)
	opt.Authorize = e.authorize
	opt.Refresh = func(p string) {
		e.refreshMu.Lock()
		e.refreshed = append(e.refreshed, p)
		e.refreshMu.Unlock()
	}
	if opt.LeaseMin == 0 {
		opt.LeaseMin, opt.LeaseDefault, opt.LeaseMax = time.Minute, 2*time.Minute, 5*time.Minute
	}
	if opt.Poll == 0 {
		opt.Poll = 50 * time.Millisecond
	}
	if opt.RetryInitial == 0 {
		opt.RetryInitial = 20 * time.Millisecond
	}
	if opt.RevokedCheck == 0 {
		opt.RevokedCheck = -1
	}
	return hub.New(st, opt)
}

// run starts h.Run until the test ends.
func (e *env) run(h *hub.Hub) {
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

func (e *env) topic(pid string) string {
	return hub.Topic{ProjectID: pid, RepositoryID: "repo-a", Format: hub.FormatAtom}.URL(pub)
}

// post sends a raw form body to the hub.
func (e *env) post(body, bearer string) *httptest.ResponseRecorder {
	return e.postTo(e.h, body, bearer, "application/x-www-form-urlencoded")
}

func (e *env) postTo(h http.Handler, body, bearer, contentType string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, hub.HubPath, strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	if bearer != "" {
		r.Header.Set("Authorization", "Bearer "+bearer)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

func (e *env) subscribeForm(pid, cb, secret string, extra ...string) string {
	kv := []string{"hub.mode", "subscribe", "hub.topic", e.topic(pid), "hub.callback", cb}
	if secret != "" {
		kv = append(kv, "hub.secret", secret)
	}
	return form(append(kv, extra...)...)
}

func wantStatus(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d; body %s", w.Code, status, w.Body)
	}
	if code == "" {
		if w.Body.Len() != 0 {
			t.Fatalf("body %q, want none", w.Body)
		}
		return
	}
	var got wire.Error
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	// The relay's one error writer (internal/apierror): JSON with
	// "; charset=utf-8" as spec §9 says, as on every relay route.
	if got.Error != code || got.Message == "" || w.Header().Get("Content-Type") != wire.ContentTypeJSON {
		t.Fatalf("error %+v (%s), want code %s", got, w.Header().Get("Content-Type"), code)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) pending() []store.Verification {
	e.t.Helper()
	vs, err := e.st.PendingVerifications(bg, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return vs
}

func (e *env) subscriptions(pid string) []store.Subscription {
	e.t.Helper()
	subs, err := e.st.Subscriptions(bg, pid)
	if err != nil {
		e.t.Fatal(err)
	}
	return subs
}

// subscribed waits for the one subscription of pid with callback cb.
func (e *env) subscribed(pid, cb string) store.Subscription {
	e.t.Helper()
	var sub store.Subscription
	eventually(e.t, "subscription of "+cb, func() bool {
		for _, s := range e.subscriptions(pid) {
			if s.Callback == cb {
				sub = s
				return true
			}
		}
		return false
	})
	return sub
}

var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22,}$`)

func TestSubscribeVerifiesAndActivates(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	cb := newCallback(t)
	target := cb.url("/cb?existing=1")
	wantStatus(t, e.post(e.subscribeForm(e.pid, target, "s3cret", "hub.lease_seconds", "200"), e.read), http.StatusAccepted, "")
	sub := e.subscribed(e.pid, target)
	if string(sub.Secret) != "s3cret" || sub.TokenID != e.read || sub.LeaseSeconds != 200 || sub.State != store.SubscriptionActive ||
		sub.Topic != e.topic(e.pid) || sub.RepositoryID != "repo-a" || sub.Format != hub.FormatAtom {
		t.Fatalf("subscription = %+v", sub)
	}
	reqs := cb.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d verification requests, want 1", len(reqs))
	}
	q := reqs[0]
	if q.Get("hub.mode") != "subscribe" || q.Get("hub.topic") != e.topic(e.pid) || q.Get("hub.lease_seconds") != "200" ||
		!challengeRE.MatchString(q.Get("hub.challenge")) || q.Get("existing") != "1" {
		t.Fatalf("verification query = %v", q)
	}
	if raw := cb.raw[0]; !strings.HasPrefix(raw, "existing=1&hub.mode=subscribe&") {
		t.Fatalf("raw query %q: want the hub's parameters appended to the existing query with &", raw)
	}
	if len(e.pending()) != 0 {
		t.Fatal("verification still pending after activation")
	}
	states, err := e.st.TargetStates(bg, store.CourierWebSub, e.pid)
	if err != nil || len(states) != 1 || states[0].Target != sub.ID {
		t.Fatalf("courier target states = %+v %v, want the subscription's cursor", states, err)
	}
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	if !slices.Equal(e.refreshed, []string{e.pid}) {
		t.Fatalf("Refresh calls = %v, want [%s]", e.refreshed, e.pid)
	}
}

func TestChallengesAreFresh(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	cb := newCallback(t)
	for i := range 3 {
		wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), e.read), http.StatusAccepted, "")
		eventually(t, "verification", func() bool { return len(cb.requests()) == i+1 && len(e.pending()) == 0 })
	}
	seen := map[string]bool{}
	for _, q := range cb.requests() {
		seen[q.Get("hub.challenge")] = true
	}
	if len(seen) != 3 {
		t.Fatalf("challenges repeat: %v", seen)
	}
}

func TestRequestValidation(t *testing.T) {
	e := newEnv(t, hub.Options{}) // no Run: nothing is verified, so every accepted request stays pending
	cb := "http://127.0.0.1:9/cb"
	long := strings.Repeat("k", hub.MaxSecretBytes)
	okForm := e.subscribeForm(e.pid, cb, "k")
	for _, tc := range []struct {
		name, body, contentType string
		status                  int
		code                    string
	}{
		{"accepted", okForm, "", 202, ""},
		{"charset parameter", okForm, "application/x-www-form-urlencoded; charset=UTF-8", 202, ""},
		{"json body", okForm, "application/json", 415, wire.CodeContentTypeUnsupported},
		{"no content type", okForm, "-", 415, wire.CodeContentTypeUnsupported},
		{"legacy and unknown parameters ignored", okForm + "&hub.verify=sync&hub.verify_token=x&foo=1&foo=2", "", 202, ""},
		{"bad form encoding", okForm + "&%zz", "", 400, wire.CodeBodyInvalid},
		{"mode missing", form("hub.topic", e.topic(e.pid), "hub.callback", cb, "hub.secret", "k"), "", 400, wire.CodeHubModeInvalid},
		{"mode unknown", form("hub.mode", "Subscribe", "hub.topic", e.topic(e.pid), "hub.callback", cb), "", 400, wire.CodeHubModeInvalid},
		{"mode denied", form("hub.mode", "denied", "hub.topic", e.topic(e.pid), "hub.callback", cb), "", 400, wire.CodeHubModeInvalid},
		{"mode publish", form("hub.mode", "publish", "hub.url", e.topic(e.pid)), "", 400, wire.CodeHubPublishUnsupported},
		{"mode repeated", okForm + "&hub.mode=subscribe", "", 400, wire.CodeHubParameterRepeated},
		{"topic repeated", okForm + "&hub.topic=" + url.QueryEscape(e.topic(e.pid)), "", 400, wire.CodeHubParameterRepeated},
		{"callback repeated", okForm + "&hub.callback=" + url.QueryEscape(cb), "", 400, wire.CodeHubParameterRepeated},
		{"lease repeated", okForm + "&hub.lease_seconds=60&hub.lease_seconds=60", "", 400, wire.CodeHubParameterRepeated},
		{"topic missing", form("hub.mode", "subscribe", "hub.callback", cb, "hub.secret", "k"), "", 400, wire.CodeHubTopicInvalid},
		{"topic of another relay", form("hub.mode", "subscribe", "hub.topic", strings.Replace(e.topic(e.pid), pub, "https://other.example", 1),
			"hub.callback", cb, "hub.secret", "k"), "", 400, wire.CodeHubTopicInvalid},
		{"topic with an unknown parameter", form("hub.mode", "subscribe", "hub.topic", e.topic(e.pid)+"&limit=5",
			"hub.callback", cb, "hub.secret", "k"), "", 400, wire.CodeHubTopicInvalid},
		{"callback missing", form("hub.mode", "subscribe", "hub.topic", e.topic(e.pid), "hub.secret", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback ftp", e.subscribeForm(e.pid, "ftp://127.0.0.1/cb", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback relative", e.subscribeForm(e.pid, "/cb", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback userinfo", e.subscribeForm(e.pid, "http://u:p@127.0.0.1/cb", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback fragment", e.subscribeForm(e.pid, "http://127.0.0.1/cb#f", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback private address", e.subscribeForm(e.pid, "http://10.1.2.3/cb", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"callback loopback not allowlisted", e.subscribeForm(e.pid, "http://[::1]/cb", "k"), "", 400, wire.CodeHubCallbackInvalid},
		{"lease 1.5", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", "1.5"), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"lease empty", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", ""), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"lease -5", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", "-5"), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"lease +5", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", "+5"), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"lease abc", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", "abc"), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"lease with space", e.subscribeForm(e.pid, cb, "k", "hub.lease_seconds", " 60"), "", 400, wire.CodeHubLeaseSecondsInvalid},
		{"private topic without secret", e.subscribeForm(e.pid, cb, ""), "", 400, wire.CodeHubSecretRequired},
		{"secret of 200 bytes", e.subscribeForm(e.pid, cb, long), "", 400, wire.CodeHubSecretInvalid},
		{"secret of 199 bytes", e.subscribeForm(e.pid, cb, long[1:]), "", 202, ""},
		{"public topic without secret or token", e.subscribeForm(e.publicPID, cb, ""), "", 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.pending())
			ct := tc.contentType
			switch ct {
			case "":
				ct = "application/x-www-form-urlencoded"
			case "-":
				ct = ""
			}
			bearer := e.read
			if strings.Contains(tc.name, "public") {
				bearer = ""
			}
			wantStatus(t, e.postTo(e.h, tc.body, bearer, ct), tc.status, tc.code)
			want := before
			if tc.status == http.StatusAccepted {
				want++
			}
			if got := len(e.pending()); got != want {
				t.Fatalf("%d pending verifications, want %d", got, want)
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, hub.HubPath, nil))
		wantStatus(t, w, http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed)
	})
	t.Run("production needs https", func(t *testing.T) {
		h := e.newHub(hub.Options{Production: true})
		w := e.postTo(h, okForm, e.read, "application/x-www-form-urlencoded")
		wantStatus(t, w, 400, wire.CodeHubCallbackInvalid)
		// The refusal says why and which operator setting lifts it.
		want := `{"error":"hub_callback_invalid","message":"hub.callback must be an https URL: this relay is published over https, and its operator has not allowed http callbacks (acrelay serve --websub-allow-http-callbacks)"}`
		if got := strings.TrimSpace(w.Body.String()); got != want {
			t.Fatalf("body %s, want %s", got, want)
		}
	})
}

// TestPrivateTopicAuthorization: a private topic's subscribe is refused
// 401, 404 or 403 and the callback hears nothing.
func TestPrivateTopicAuthorization(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	refused := newCallback(t)
	revoked := e.token(e.pid, store.ScopeRead)
	if err := e.st.RevokeToken(bg, revoked); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bearer string
		status       int
		code         string
	}{
		{"no bearer", "", 401, wire.CodeUnauthorized},
		{"unknown token", uuid.NewString(), 401, wire.CodeUnauthorized},
		{"revoked token", revoked, 401, wire.CodeUnauthorized},
		{"another project's token", e.alien, 404, wire.CodeNotFound},
		{"token without read", e.appendOnly, 403, wire.CodeScopeInsufficient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.post(e.subscribeForm(e.pid, refused.url("/cb"), "k"), tc.bearer)
			wantStatus(t, w, tc.status, tc.code)
			if tc.status == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// Authorization comes before the callback check (which may resolve
	// a name): a refused callback with no token is 401, not 400.
	wantStatus(t, e.post(e.subscribeForm(e.pid, "http://10.1.2.3/cb", "k"), ""), 401, wire.CodeUnauthorized)
	// A barrier: an accepted request verified after the refused ones.
	ok := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.pid, ok.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	e.subscribed(e.pid, ok.url("/cb"))
	if n := len(refused.requests()); n != 0 {
		t.Fatalf("%d requests reached the refused subscriptions' callback, want 0", n)
	}
	if len(e.pending()) != 0 {
		t.Fatal("a refused request left a pending verification")
	}
}

func TestPublicTopic(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	cb := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.publicPID, cb.url("/cb"), ""), ""), http.StatusAccepted, "")
	sub := e.subscribed(e.publicPID, cb.url("/cb"))
	if len(sub.Secret) != 0 || sub.TokenID != "" {
		t.Fatalf("public subscription = %+v, want no secret and no token", sub)
	}
}

// TestChallengeMismatch: only a 2xx whose body is exactly the challenge
// activates.
func TestChallengeMismatch(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	for _, tc := range []struct {
		name   string
		answer func(q url.Values) (int, string)
	}{
		{"trailing newline", func(q url.Values) (int, string) { return 200, q.Get("hub.challenge") + "\n" }},
		{"leading space", func(q url.Values) (int, string) { return 200, " " + q.Get("hub.challenge") }},
		{"prefix only", func(q url.Values) (int, string) { return 200, q.Get("hub.challenge")[:20] }},
		{"empty 200", func(url.Values) (int, string) { return 200, "" }},
		{"echo with 404", func(q url.Values) (int, string) { return 404, q.Get("hub.challenge") }},
		{"echo with 302", func(q url.Values) (int, string) { return 302, q.Get("hub.challenge") }},
		{"echo with 500", func(q url.Values) (int, string) { return 500, q.Get("hub.challenge") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := newCallback(t)
			cb.setAnswer(tc.answer)
			wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), e.read), http.StatusAccepted, "")
			// At least one request (a transport error under load may be
			// retried), then the verification is gone.
			eventually(t, "the verification to be dropped", func() bool { return len(cb.requests()) >= 1 && len(e.pending()) == 0 })
			for _, s := range e.subscriptions(e.pid) {
				if s.Callback == cb.url("/cb") {
					t.Fatalf("a mismatched answer activated %+v", s)
				}
			}
		})
	}
}

// TestFailedReverificationKeepsSubscription: a renewal the callback does
// not confirm leaves the earlier subscription, its secret and lease.
func TestFailedReverificationKeepsSubscription(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	cb := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "first", "hub.lease_seconds", "100"), e.read), http.StatusAccepted, "")
	first := e.subscribed(e.pid, cb.url("/cb"))
	cb.setAnswer(func(url.Values) (int, string) { return 404, "" })
	other := e.token(e.pid, store.ScopeRead)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "second", "hub.lease_seconds", "300"), other), http.StatusAccepted, "")
	eventually(t, "the renewal to be refused", func() bool { return len(cb.requests()) == 2 && len(e.pending()) == 0 })
	got, err := e.st.Subscription(bg, e.pid, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Secret) != "first" || got.TokenID != e.read || got.LeaseSeconds != 100 || !got.ExpiresAt.Equal(first.ExpiresAt) {
		t.Fatalf("after a refused renewal = %+v, want %+v", got, first)
	}
	// A confirmed renewal takes the new secret, keeping the id.
	cb.setAnswer(nil)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "third"), other), http.StatusAccepted, "")
	eventually(t, "the renewal", func() bool {
		s, err := e.st.Subscription(bg, e.pid, first.ID)
		return err == nil && string(s.Secret) == "third" && s.TokenID == other
	})
	if n := len(e.subscriptions(e.pid)); n != 1 {
		t.Fatalf("%d subscriptions after renewal, want 1", n)
	}
}

func TestLeaseClamping(t *testing.T) {
	e := newEnv(t, hub.Options{LeaseMin: time.Minute, LeaseDefault: 2 * time.Minute, LeaseMax: 5 * time.Minute})
	e.run(e.h)
	for _, tc := range []struct {
		name, lease string
		want        int64
	}{
		{"absent: default", "-", 120},
		{"0: minimum", "0", 60},
		{"below minimum", "10", 60},
		{"inside", "200", 200},
		{"leading zeros", "0200", 200},
		{"above maximum", "301", 300},
		{"beyond int64", "99999999999999999999999", 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb := newCallback(t)
			var extra []string
			if tc.lease != "-" {
				extra = []string{"hub.lease_seconds", tc.lease}
			}
			wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k", extra...), e.read), http.StatusAccepted, "")
			sub := e.subscribed(e.pid, cb.url("/cb"))
			if sub.LeaseSeconds != tc.want {
				t.Fatalf("granted %d, want %d", sub.LeaseSeconds, tc.want)
			}
			if got := cb.requests()[0].Get("hub.lease_seconds"); got != strconv.FormatInt(tc.want, 10) {
				t.Fatalf("verification sent hub.lease_seconds=%q, want the granted %d", got, tc.want)
			}
			if d := sub.ExpiresAt.Sub(sub.VerifiedAt); d != time.Duration(tc.want)*time.Second {
				t.Fatalf("lease ends %v after verification, want %ds", d, tc.want)
			}
		})
	}
}

func TestUnsubscribe(t *testing.T) {
	e := newEnv(t, hub.Options{})
	e.run(e.h)
	cb := newCallback(t)
	unsub := form("hub.mode", "unsubscribe", "hub.topic", e.topic(e.pid), "hub.callback", cb.url("/cb"))

	// Unknown (topic, callback): 202, no state, no request.
	wantStatus(t, e.post(unsub, ""), http.StatusAccepted, "")
	if len(e.pending()) != 0 {
		t.Fatal("an unknown unsubscribe stored a verification")
	}
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	sub := e.subscribed(e.pid, cb.url("/cb"))
	if n := len(cb.requests()); n != 1 {
		t.Fatalf("%d callback requests, want only the subscribe's verification", n)
	}

	// Known: no capability needed; verified, then removed with its cursor.
	wantStatus(t, e.post(unsub, ""), http.StatusAccepted, "")
	eventually(t, "unsubscribe", func() bool { return len(e.subscriptions(e.pid)) == 0 })
	reqs := cb.requests()
	if len(reqs) != 2 || reqs[1].Get("hub.mode") != "unsubscribe" || reqs[1].Get("hub.topic") != e.topic(e.pid) ||
		!challengeRE.MatchString(reqs[1].Get("hub.challenge")) || reqs[1].Has("hub.lease_seconds") {
		t.Fatalf("unsubscribe verification = %v", reqs)
	}
	if states, _ := e.st.TargetStates(bg, store.CourierWebSub, e.pid); slices.ContainsFunc(states, func(s store.TargetState) bool { return s.Target == sub.ID }) {
		t.Fatal("the unsubscribed subscription's cursor remains")
	}

	// An unsubscribe the callback does not confirm changes nothing.
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	again := e.subscribed(e.pid, cb.url("/cb"))
	cb.setAnswer(func(url.Values) (int, string) { return 404, "" })
	wantStatus(t, e.post(unsub, ""), http.StatusAccepted, "")
	eventually(t, "the refused unsubscribe", func() bool { return len(cb.requests()) == 4 && len(e.pending()) == 0 })
	if subs := e.subscriptions(e.pid); len(subs) != 1 || subs[0].ID != again.ID {
		t.Fatalf("after a refused unsubscribe: %+v", subs)
	}
}

// TestTransportErrorsRetryThenGiveUp: an unreachable callback is tried
// MaxAttempts times, then the verification is dropped.
func TestTransportErrorsRetryThenGiveUp(t *testing.T) {
	e := newEnv(t, hub.Options{MaxAttempts: 3})
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/cb"
	dead.Close()
	wantStatus(t, e.post(e.subscribeForm(e.pid, deadURL, "k"), e.read), http.StatusAccepted, "")
	e.run(e.h)
	var maxAttempts int
	eventually(t, "give-up", func() bool {
		vs := e.pending()
		for _, v := range vs {
			maxAttempts = max(maxAttempts, v.Attempts)
		}
		return len(vs) == 0
	})
	if maxAttempts != 2 {
		t.Fatalf("attempts counted before giving up = %d, want 2 (the third failure gives up)", maxAttempts)
	}
	if len(e.subscriptions(e.pid)) != 0 {
		t.Fatal("an unreachable callback was subscribed")
	}
}

// TestSlowCallbackDoesNotDelayOthers: verifications run concurrently.
func TestSlowCallbackDoesNotDelayOthers(t *testing.T) {
	e := newEnv(t, hub.Options{RequestTimeout: 30 * time.Second})
	e.run(e.h)
	slow := newCallback(t)
	slow.release = make(chan struct{})
	defer close(slow.release)
	wantStatus(t, e.post(e.subscribeForm(e.pid, slow.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	eventually(t, "the slow callback to be called", func() bool { return len(slow.requests()) == 1 })
	fast := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.pid, fast.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	e.subscribed(e.pid, fast.url("/cb"))
}

// TestRestartDurability: a verification accepted before a restart is
// processed by the next process's hub.
func TestRestartDurability(t *testing.T) {
	e := newEnv(t, hub.Options{})
	cb := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "kept", "hub.lease_seconds", "90"), e.read), http.StatusAccepted, "")
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	e.st = e.open()
	if n := len(e.pending()); n != 1 {
		t.Fatalf("%d pending verifications after reopening, want 1", n)
	}
	h := e.newHub(hub.Options{})
	e.run(h)
	sub := e.subscribed(e.pid, cb.url("/cb"))
	if string(sub.Secret) != "kept" || sub.LeaseSeconds != 90 || sub.TokenID != e.read {
		t.Fatalf("after restart: %+v", sub)
	}
	if q := cb.requests()[0]; q.Get("hub.lease_seconds") != "90" {
		t.Fatalf("verification after restart = %v", q)
	}
}

// TestDenyOnRevocation: revoking the token behind a subscription removes
// it and sends hub.mode=denied, by DenyRevoked and by the periodic check.
func TestDenyOnRevocation(t *testing.T) {
	e := newEnv(t, hub.Options{RevokedCheck: 50 * time.Millisecond})
	e.run(e.h)
	cb := newCallback(t)
	keep := newCallback(t)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), e.read), http.StatusAccepted, "")
	wantStatus(t, e.post(e.subscribeForm(e.pid, keep.url("/cb"), "k"), e.token(e.pid, store.ScopeRead)), http.StatusAccepted, "")
	sub := e.subscribed(e.pid, cb.url("/cb"))
	e.subscribed(e.pid, keep.url("/cb"))

	if err := e.h.DenyRevoked(bg, e.read); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Subscription(bg, e.pid, sub.ID); err != nil {
		t.Fatalf("DenyRevoked of a live token removed its subscription: %v", err)
	}
	if err := e.st.RevokeToken(bg, e.read); err != nil {
		t.Fatal(err)
	}
	if err := e.h.DenyRevoked(bg, e.read); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Subscription(bg, e.pid, sub.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("subscription after revocation: %v, want ErrNotFound", err)
	}
	eventually(t, "the denial notice", func() bool { return len(cb.requests()) == 2 })
	d := cb.requests()[1]
	if d.Get("hub.mode") != "denied" || d.Get("hub.topic") != e.topic(e.pid) || d.Get("hub.reason") != hub.ReasonTokenRevoked {
		t.Fatalf("denial = %v", d)
	}
	if subs := e.subscriptions(e.pid); len(subs) != 1 || subs[0].Callback != keep.url("/cb") {
		t.Fatalf("other token's subscription touched: %+v", subs)
	}

	// A revocation made elsewhere: the periodic check denies it.
	if err := e.st.RevokeToken(bg, e.subscriptions(e.pid)[0].TokenID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the periodic denial", func() bool { return len(e.subscriptions(e.pid)) == 0 && len(keep.requests()) == 2 })
	if keep.requests()[1].Get("hub.mode") != "denied" {
		t.Fatalf("periodic denial = %v", keep.requests()[1])
	}

}

// TestRevokedBeforeVerification: a verification whose token is revoked
// before it runs is dropped without a request.
func TestRevokedBeforeVerification(t *testing.T) {
	e := newEnv(t, hub.Options{})
	cb := newCallback(t)
	tok := e.token(e.pid, store.ScopeRead)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), tok), http.StatusAccepted, "")
	if err := e.st.RevokeToken(bg, tok); err != nil {
		t.Fatal(err)
	}
	e.run(e.h)
	eventually(t, "the verification to be dropped", func() bool { return len(e.pending()) == 0 })
	if n := len(cb.requests()); n != 0 || len(e.subscriptions(e.pid)) != 0 {
		t.Fatalf("%d callback requests, subscriptions %v; want none", n, e.subscriptions(e.pid))
	}
}

// TestRevokedCheckOnlyOnTheLeaseHolder: with several processes, only the
// holder of the scan's relay-wide lease runs the periodic revoked-token
// check; the others leave the subscription alone. The ten checks it
// skips are counted (RevokedCheckHeld is asked at each), not guessed
// from a sleep.
func TestRevokedCheckOnlyOnTheLeaseHolder(t *testing.T) {
	var held atomic.Bool
	var asked atomic.Int64 // periodic checks that asked whether the lease is held
	e := newEnv(t, hub.Options{RevokedCheck: 20 * time.Millisecond, RevokedCheckHeld: func() bool {
		asked.Add(1)
		return held.Load()
	}})
	e.run(e.h)
	cb := newCallback(t)
	tok := e.token(e.pid, store.ScopeRead)
	wantStatus(t, e.post(e.subscribeForm(e.pid, cb.url("/cb"), "k"), tok), http.StatusAccepted, "")
	e.subscribed(e.pid, cb.url("/cb"))
	if err := e.st.RevokeToken(bg, tok); err != nil {
		t.Fatal(err)
	}
	after := asked.Load()
	eventually(t, "ten periodic checks after the revocation", func() bool { return asked.Load() >= after+10 })
	if n := len(e.subscriptions(e.pid)); n != 1 {
		t.Fatalf("a process without the scan's lease denied: %d subscriptions left", n)
	}
	for _, q := range cb.requests() {
		if q.Get("hub.mode") == "denied" {
			t.Fatal("a process without the scan's lease sent a denial")
		}
	}
	held.Store(true)
	eventually(t, "the holder's denial", func() bool {
		rs := cb.requests()
		return len(e.subscriptions(e.pid)) == 0 && len(rs) > 0 && rs[len(rs)-1].Get("hub.mode") == "denied"
	})
}
