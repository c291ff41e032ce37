package relay_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
)

const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// syncBuffer is a log sink the handler goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// uiEnv is a relay whose debug log is kept, behind a real HTTP server
// whose PublicURL is its own URL (as a browser sees it).
type uiEnv struct {
	*env
	logs *syncBuffer
}

func newUIEnv(t *testing.T, public string) *uiEnv {
	t.Helper()
	st := openTestStore(t)
	logs := &syncBuffer{}
	srv := httptest.NewUnstartedServer(nil)
	if public == "" {
		public = "http://" + srv.Listener.Addr().String()
	}
	s := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: public, WakeHeartbeat: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv.Config.Handler = s.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(s.CloseStreams)
	return &uiEnv{env: &env{t: t, st: st, srv: srv, url: srv.URL}, logs: logs}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// ui sends a request without following redirects; form (when non-nil) is
// the urlencoded body; hdr holds header pairs.
func (e *uiEnv) ui(method, path string, form url.Values, cookies []*http.Cookie, hdr ...string) resp {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

func cookiesOf(r resp) map[string]*http.Cookie {
	out := make(map[string]*http.Cookie)
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		out[c.Name] = c
	}
	return out
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, r resp) string {
	t.Helper()
	m := csrfField.FindSubmatch(r.Body)
	if m == nil {
		t.Fatalf("no csrf field in %s", r.Body)
	}
	return string(m[1])
}

// signIn goes through the form and returns the session cookie.
func (e *uiEnv) signIn(tok, repo string) *http.Cookie {
	e.t.Helper()
	form := e.ui("GET", "/ui/signin", nil, nil)
	mustStatus(e.t, form, 200)
	pre := cookiesOf(form)["acrelay_ui_signin"]
	r := e.ui("POST", "/ui/signin", url.Values{"token": {tok}, "repository_id": {repo}, "csrf": {csrfOf(e.t, form)}}, []*http.Cookie{pre})
	mustStatus(e.t, r, 303)
	c := cookiesOf(r)["acrelay_ui_session"]
	if c == nil {
		e.t.Fatalf("no session cookie: %v", r.Header)
	}
	return c
}

func mustSecurityHeaders(t *testing.T, r resp) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": uiCSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY",
	} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestUISignInAndPage(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	mustStatus(t, e.post(a, a.claim("repo-1", "thread-1", newUUID(), 1, "", time.Now().Add(time.Hour), "docs/api")), 201)
	mustStatus(t, e.post(a, a.intent("repo-1", "rewrite the API docs")), 201)
	readTok := e.newToken(pid, "read")

	form := e.ui("GET", "/ui/signin?repository_id=repo-1", nil, nil)
	mustStatus(t, form, 200)
	mustSecurityHeaders(t, form)
	if ct := form.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	pre := cookiesOf(form)["acrelay_ui_signin"]
	if pre == nil || !pre.HttpOnly || pre.SameSite != http.SameSiteStrictMode || pre.Secure || pre.Path != "/ui" {
		t.Fatalf("sign-in cookie %+v", pre)
	}
	r := e.ui("POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"repo-1"}, "csrf": {csrfOf(t, form)}}, []*http.Cookie{pre})
	mustStatus(t, r, 303)
	mustSecurityHeaders(t, r)
	if loc, want := r.Header.Get("Location"), "/ui/projects/"+pid+"?repository_id=repo-1"; loc != want {
		t.Fatalf("Location %q, want %q", loc, want)
	}
	sess := cookiesOf(r)["acrelay_ui_session"]
	switch {
	case sess == nil:
		t.Fatal("no session cookie")
	case !sess.HttpOnly, sess.SameSite != http.SameSiteStrictMode, sess.Secure, sess.Path != "/ui":
		t.Fatalf("session cookie flags %+v", sess)
	case sess.MaxAge != 12*60*60:
		t.Fatalf("session cookie Max-Age %d, want 43200", sess.MaxAge)
	case strings.Contains(sess.Value, readTok) || len(sess.Value) < 43:
		t.Fatalf("session cookie value %q", sess.Value)
	}

	page := e.ui("GET", "/ui/projects/"+pid+"?repository_id=repo-1", nil, []*http.Cookie{sess})
	mustStatus(t, page, 200)
	mustSecurityHeaders(t, page)
	for _, want := range []string{"<code>docs/api</code>", "rewrite the API docs", `<script src="/ui/static/ui.js">`, "Active claims <span class=\"count\">(1)</span>"} {
		if !bytes.Contains(page.Body, []byte(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	if cc := page.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("page Cache-Control %q", cc)
	}
	frag := e.ui("GET", "/ui/projects/"+pid+"/fragment?repository_id=repo-1", nil, []*http.Cookie{sess})
	mustStatus(t, frag, 200)
	if !bytes.HasPrefix(frag.Body, []byte(`<div id="live">`)) || bytes.Contains(frag.Body, []byte("<html")) {
		t.Errorf("fragment %s", frag.Body)
	}
	rec := e.ui("GET", "/ui/projects/"+pid+"/records/2?repository_id=repo-1", nil, []*http.Cookie{sess})
	mustStatus(t, rec, 200)
	if !bytes.Contains(rec.Body, []byte(`"summary":"rewrite the API docs"`)) || !bytes.HasPrefix(rec.Body, []byte(`{"event":`)) {
		t.Errorf("record %s", rec.Body)
	}
	mustStatus(t, e.ui("GET", "/ui/projects/"+pid+"/records/9?repository_id=repo-1", nil, []*http.Cookie{sess}), 404)
	mustStatus(t, e.ui("GET", "/ui/projects/"+pid+"/records/2?repository_id=repo-2", nil, []*http.Cookie{sess}), 404)
	for _, f := range []string{"ui.css", "ui.js"} {
		s := e.ui("GET", "/ui/static/"+f, nil, nil)
		mustStatus(t, s, 200)
		mustSecurityHeaders(t, s)
	}
}

func TestUIRefusals(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	other, _ := e.newProject("")
	readTok := e.newToken(pid, "read")
	appendOnly := e.newToken(pid, "append")
	sess := e.signIn(readTok, "repo-1")
	form := e.ui("GET", "/ui/signin", nil, nil)
	pre, csrf := cookiesOf(form)["acrelay_ui_signin"], csrfOf(t, form)
	_ = tok

	cases := []struct {
		name    string
		method  string
		path    string
		form    url.Values
		cookies []*http.Cookie
		hdr     []string
		status  int
		loc     string
	}{
		{"sign-in without csrf", "POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"r"}}, []*http.Cookie{pre}, nil, 403, ""},
		{"sign-in csrf without its cookie", "POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"r"}, "csrf": {csrf}}, nil, nil, 403, ""},
		{"sign-in csrf mismatch", "POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"r"}, "csrf": {csrf + "x"}}, []*http.Cookie{pre}, nil, 403, ""},
		{"sign-in cross-site", "POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"r"}, "csrf": {csrf}}, []*http.Cookie{pre}, []string{"Sec-Fetch-Site", "cross-site"}, 403, ""},
		{"sign-in wrong token", "POST", "/ui/signin", url.Values{"token": {"acr_nope"}, "repository_id": {"r"}, "csrf": {csrf}}, []*http.Cookie{pre}, nil, 401, ""},
		{"sign-in operator token", "POST", "/ui/signin", url.Values{"token": {operatorToken}, "repository_id": {"r"}, "csrf": {csrf}}, []*http.Cookie{pre}, nil, 403, ""},
		{"sign-in without read scope", "POST", "/ui/signin", url.Values{"token": {appendOnly}, "repository_id": {"r"}, "csrf": {csrf}}, []*http.Cookie{pre}, nil, 403, ""},
		{"sign-in bad repository", "POST", "/ui/signin", url.Values{"token": {readTok}, "repository_id": {"a b"}, "csrf": {csrf}}, []*http.Cookie{pre}, nil, 400, ""},
		{"token in the query", "GET", "/ui/signin?token=" + url.QueryEscape(readTok), nil, nil, nil, 400, ""},
		{"feed link", "GET", "/ui/projects/" + pid + "?repository_id=r&feed=acf_x", nil, nil, nil, 400, ""},
		{"page without session", "GET", "/ui/projects/" + pid + "?repository_id=repo-1", nil, nil, nil, 303, "/ui/signin?repository_id=repo-1"},
		{"page with unknown session", "GET", "/ui/projects/" + pid + "?repository_id=repo-1", nil, []*http.Cookie{{Name: "acrelay_ui_session", Value: "forged"}}, nil, 303, "/ui/signin?repository_id=repo-1"},
		{"fragment without session", "GET", "/ui/projects/" + pid + "/fragment?repository_id=repo-1", nil, nil, nil, 401, ""},
		{"live without session", "GET", "/ui/projects/" + pid + "/live?repository_id=repo-1", nil, nil, nil, 401, ""},
		{"record without session", "GET", "/ui/projects/" + pid + "/records/1?repository_id=repo-1", nil, nil, nil, 401, ""},
		{"another project", "GET", "/ui/projects/" + other + "?repository_id=repo-1", nil, []*http.Cookie{sess}, nil, 404, ""},
		{"no repository", "GET", "/ui/projects/" + pid, nil, []*http.Cookie{sess}, nil, 400, ""},
		{"unknown parameter", "GET", "/ui/projects/" + pid + "?repository_id=repo-1&x=1", nil, []*http.Cookie{sess}, nil, 400, ""},
		{"sign-out without csrf", "POST", "/ui/signout", url.Values{}, []*http.Cookie{sess}, nil, 403, ""},
		{"sign-out with another csrf", "POST", "/ui/signout", url.Values{"csrf": {csrf}}, []*http.Cookie{sess}, nil, 403, ""},
		{"sign-out cross-site", "POST", "/ui/signout", url.Values{"csrf": {csrf}}, []*http.Cookie{sess}, []string{"Sec-Fetch-Site", "cross-site"}, 403, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.ui(tc.method, tc.path, tc.form, tc.cookies, tc.hdr...)
			mustStatus(t, r, tc.status)
			mustSecurityHeaders(t, r)
			if loc := r.Header.Get("Location"); loc != tc.loc {
				t.Errorf("Location %q, want %q", loc, tc.loc)
			}
			if bytes.Contains(r.Body, []byte(readTok)) || bytes.Contains(r.Body, []byte(operatorToken)) {
				t.Errorf("the body echoes a token: %s", r.Body)
			}
		})
	}
	// The session survived every refused sign-out.
	mustStatus(t, e.ui("GET", "/ui/projects/"+pid+"?repository_id=repo-1", nil, []*http.Cookie{sess}), 200)
}

func TestUISignOutAndRevocation(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	readTok := e.newToken(pid, "read")
	page := "/ui/projects/" + pid + "?repository_id=repo-1"

	sess := e.signIn(readTok, "repo-1")
	p := e.ui("GET", page, nil, []*http.Cookie{sess})
	mustStatus(t, p, 200)
	out := e.ui("POST", "/ui/signout", url.Values{"csrf": {csrfOf(t, p)}}, []*http.Cookie{sess})
	mustStatus(t, out, 303)
	if loc := out.Header.Get("Location"); loc != "/ui/signin" {
		t.Errorf("Location %q", loc)
	}
	if c := cookiesOf(out)["acrelay_ui_session"]; c == nil || c.MaxAge >= 0 || c.Value != "" {
		t.Errorf("sign-out does not clear the cookie: %+v", c)
	}
	mustStatus(t, e.ui("GET", page, nil, []*http.Cookie{sess}), 303) // the old cookie is dead server-side

	// Revoking the token ends its sessions at the next request.
	sess = e.signIn(readTok, "repo-1")
	mustStatus(t, e.ui("GET", page, nil, []*http.Cookie{sess}), 200)
	r := e.do("GET", "/v1/admin/projects/"+pid+"/tokens", tok, nil)
	mustStatus(t, r, 200)
	var tokenID string
	for _, it := range r.json(t)["tokens"].([]any) {
		m := it.(map[string]any)
		if sc := m["scopes"].([]any); len(sc) == 1 && sc[0] == "read" {
			tokenID = m["token_id"].(string)
		}
	}
	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+tokenID, tok, nil), 204)
	mustStatus(t, e.ui("GET", page, nil, []*http.Cookie{sess}), 303)
	mustStatus(t, e.ui("GET", "/ui/projects/"+pid+"/fragment?repository_id=repo-1", nil, []*http.Cookie{sess}), 401)
}

func TestUISecureCookieBehindHTTPS(t *testing.T) {
	e := newUIEnv(t, "https://relay.example")
	pid, _ := e.newProject("")
	readTok := e.newToken(pid, "read")
	form := e.ui("GET", "/ui/signin", nil, nil)
	if c := cookiesOf(form)["acrelay_ui_signin"]; c == nil || !c.Secure {
		t.Fatalf("sign-in cookie not Secure: %+v", c)
	}
	if c := e.signIn(readTok, "repo-1"); !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v", c)
	}
}

// TestUITokenNeverInURLOrLog signs in, fails to sign in, puts a token in a
// query, and checks that no token reaches a Location header or the log.
func TestUITokenNeverInURLOrLog(t *testing.T) {
	e := newUIEnv(t, "")
	pid, _ := e.newProject("")
	readTok := e.newToken(pid, "read")
	form := e.ui("GET", "/ui/signin", nil, nil)
	pre, csrf := cookiesOf(form)["acrelay_ui_signin"], csrfOf(t, form)
	var locations []string
	for _, tk := range []string{readTok, readTok + "x", operatorToken} {
		r := e.ui("POST", "/ui/signin", url.Values{"token": {tk}, "repository_id": {"repo-1"}, "csrf": {csrf}}, []*http.Cookie{pre})
		locations = append(locations, r.Header.Get("Location"))
	}
	r := e.ui("GET", "/ui/signin?token="+url.QueryEscape(readTok), nil, nil)
	mustStatus(t, r, 400)
	locations = append(locations, r.Header.Get("Location"))
	logs := e.logs.String()
	if !strings.Contains(logs, "ui session created") {
		t.Fatalf("the sign-in was not logged: %s", logs)
	}
	for _, tk := range []string{readTok, operatorToken} {
		if strings.Contains(logs, tk) {
			t.Errorf("a token is in the log:\n%s", logs)
		}
		for _, loc := range locations {
			if strings.Contains(loc, tk) {
				t.Errorf("a token is in a redirect: %q", loc)
			}
		}
	}
}

// TestUILiveStream: the live stream sends an invalidation with the new
// received_seq when the project advances, and nothing of the event.
func TestUILiveStream(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	sess := e.signIn(e.newToken(pid, "read"), "repo-1")
	req, _ := http.NewRequest("GET", e.url+"/ui/projects/"+pid+"/live?repository_id=repo-1", nil)
	req.AddCookie(sess)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("Content-Security-Policy") != uiCSP {
		t.Fatalf("live: %d %v", res.StatusCode, res.Header)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	mustStatus(t, e.post(a, a.intent("repo-1", "secret plans")), 201)
	deadline := time.After(5 * time.Second)
	var got []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream ended: %q", got)
			}
			got = append(got, l)
			if strings.Contains(l, "secret") {
				t.Fatalf("a frame carries event data: %q", l)
			}
			if l == "data: 1" && len(got) >= 2 && got[len(got)-2] == "event: invalidate" {
				return
			}
		case <-deadline:
			t.Fatalf("no invalidation within 5s: %q", got)
		}
	}
}

// TestUIEscapesEventText: hostile text from an event is escaped in the
// page, never markup.
func TestUIEscapesEventText(t *testing.T) {
	e := newUIEnv(t, "")
	pid, tok := e.newProject("")
	a := e.newAgent(pid, tok)
	hostile := `<script>alert(1)</script>"><img src=x onerror=alert(1)>`
	mustStatus(t, e.post(a, a.intent("repo-1", hostile)), 201)
	mustStatus(t, e.post(a, a.event("repo-1", "thread-1", correspondence.KindProgress, obj("summary", "<b>bold</b> & \"quoted\""), nil)), 201)
	sess := e.signIn(e.newToken(pid, "read"), "repo-1")
	r := e.ui("GET", "/ui/projects/"+pid+"/fragment?repository_id=repo-1", nil, []*http.Cookie{sess})
	mustStatus(t, r, 200)
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>bold"} {
		if bytes.Contains(r.Body, []byte(bad)) {
			t.Errorf("unescaped %q in %s", bad, r.Body)
		}
	}
	if !bytes.Contains(r.Body, []byte("&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;")) {
		t.Errorf("escaped summary missing: %s", r.Body)
	}
}
