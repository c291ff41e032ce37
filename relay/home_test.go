package relay_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acrelay/acrelay/hub"
)

// notFoundJSON is the body of GET / for an API client: the relay's JSON
// 404, byte for byte what it was before the front page existed.
const notFoundJSON = `{"error":"not_found","message":"no such resource"}`

// browserAccept is what Chromium sends on a navigation.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"

var attrURL = regexp.MustCompile(`(?i)\b(?:src|href|action|srcset|poster|data)\s*=\s*"([^"]*)"`)

// TestHomePage: GET / is a small HTML page for a browser (the web view's
// CSP and headers, only same-origin resources, links to the sign-in, the
// profile and the log key) and the unchanged JSON 404 for everyone else.
func TestHomePage(t *testing.T) {
	e := newUIEnv(t, "https://relay.example")

	r := e.ui("GET", "/", nil, nil, "Accept", browserAccept)
	mustStatus(t, r, 200)
	mustSecurityHeaders(t, r)
	if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if v := r.Header.Get("Vary"); v != "Accept" {
		t.Errorf("Vary %q, want Accept", v)
	}
	body := string(r.Body)
	for _, want := range []string{
		`<a id="signin" href="/ui/signin">`, `<a id="profile" href="/v1/profile">`, `<a id="log-key" href="/v1/log-key">`,
		`<link rel="stylesheet" href="/ui/static/ui.css">`,
		"https://relay.example/v1/correspondence/events?repository_id=&lt;repository id&gt;",
		"docs/agents.md",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") {
		t.Error("the front page has a script")
	}
	for _, m := range attrURL.FindAllStringSubmatch(body, -1) {
		if u := m[1]; !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") {
			t.Errorf("resource or link %q is not on this origin", u)
		}
	}
	if h := e.ui("HEAD", "/", nil, nil, "Accept", "text/html"); h.Status != 200 || len(h.Body) != 0 || h.Header.Get("Content-Length") != r.Header.Get("Content-Length") {
		t.Errorf("HEAD: %d, %d bytes, Content-Length %q", h.Status, len(h.Body), h.Header.Get("Content-Length"))
	}

	for _, tc := range []struct {
		name, method, accept string
	}{
		{"no Accept", "GET", ""},
		{"curl", "GET", "*/*"},
		{"JSON", "GET", "application/json"},
		{"vendor JSON", "GET", "application/vnd.agenttool.correspondence+json"},
		{"JSON preferred over HTML", "GET", "application/json, text/html;q=0.5"},
		{"HTML refused", "GET", "text/html;q=0, */*"},
		{"POST from a browser", "POST", browserAccept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.accept != "" {
				hdr = []string{"Accept", tc.accept}
			}
			r := e.ui(tc.method, "/", nil, nil, hdr...)
			mustStatus(t, r, 404)
			if string(r.Body) != notFoundJSON || r.Header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Errorf("%s %q: %q (%s), want the JSON 404", tc.method, tc.accept, r.Body, r.Header.Get("Content-Type"))
			}
			if r.Header.Get("Content-Security-Policy") != "" {
				t.Error("the JSON answer carries the web view's CSP")
			}
		})
	}
}

// TestUnauthorizedHint: no Authorization gets the hint to send one; a
// bearer token sent and refused (unknown, malformed, revoked) gets the
// same code and message and a hint that does not ask for what was sent.
func TestUnauthorizedHint(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	const missing = `{"error":"unauthorized","message":"a valid bearer token is required","hint":"send Authorization: Bearer <token>"}`
	const rejected = `{"error":"unauthorized","message":"a valid bearer token is required","hint":"the bearer token sent is not accepted (unknown, revoked or mistyped): check which token the client sends (ACRELAY_TOKEN, --token-file)"}`
	revoked := e.newToken(pid, "read")
	revokedID := e.do("GET", "/v1/whoami", revoked, nil).json(t)["token_id"].(string)
	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+revokedID, tok, nil), 204)
	for _, tc := range []struct{ name, tok, want string }{
		{"none", "", missing},
		{"malformed", "not-a-token", rejected},
		{"unknown", "acr_aaaaaaaaaaaaaaaaaaaaaaaaaa_" + strings.Repeat("A", 43), rejected},
		{"mistyped", tok[:len(tok)-1] + "x", rejected},
		{"revoked", revoked, rejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("GET", "/v1/correspondence/events?repository_id=r", tc.tok, nil)
			mustStatus(t, r, 401)
			if string(r.Body) != tc.want {
				t.Errorf("body %s\nwant %s", r.Body, tc.want)
			}
		})
	}
}

// TestWebSubLoopbackCallbackNamesTheSwitch: a subscribe whose callback is
// loopback or local-use is refused with a message naming
// --websub-allow-hosts (and never echoing the callback); with localhost
// allowed, a localhost callback is verified and the subscription stored.
func TestWebSubLoopbackCallbackNamesTheSwitch(t *testing.T) {
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.URL.Query().Get("hub.challenge")))
	}))
	t.Cleanup(cb.Close)
	_, port, _ := net.SplitHostPort(cb.Listener.Addr().String())
	subscribe := func(e *env, pid, tok, callback string) resp {
		topic := hub.Topic{ProjectID: pid, RepositoryID: "repo-a", Format: hub.FormatAtom}.URL("http://relay.test")
		body := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {callback}, "hub.secret": {"a-secret-of-the-subscriber"}}.Encode()
		return e.do("POST", hub.HubPath, tok, []byte(body), "Content-Type", "application/x-www-form-urlencoded")
	}

	e, _ := newHubEnvAllowing(t)
	pid, tok := e.newProject("")
	const want = `{"error":"hub_callback_invalid","message":"hub.callback is a loopback, private or local-use host, which this hub refuses (SSRF guard); for tests on one machine the relay's operator can allow it with --websub-allow-hosts (e.g. 127.0.0.1,localhost; env ACRELAY_WEBSUB_ALLOW_HOSTS)"}`
	for _, callback := range []string{"http://127.0.0.1:" + port + "/cb", "http://localhost:" + port + "/cb", "http://10.1.2.3/cb", "http://[::1]:" + port + "/cb"} {
		r := subscribe(e, pid, tok, callback)
		mustStatus(t, r, 400)
		if string(r.Body) != want {
			t.Errorf("%s: %s", callback, r.Body)
		}
	}
	// A malformed callback keeps the general message.
	if r := subscribe(e, pid, tok, "ftp://example.com/cb"); r.Status != 400 || strings.Contains(string(r.Body), "websub-allow-hosts") {
		t.Errorf("ftp callback: %d %s", r.Status, r.Body)
	}

	e2, _ := newHubEnvAllowing(t, "localhost")
	pid2, tok2 := e2.newProject("")
	mustStatus(t, subscribe(e2, pid2, tok2, "http://localhost:"+port+"/cb"), 202)
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs, err := e2.st.Subscriptions(context.Background(), pid2)
		if err != nil {
			t.Fatal(err)
		}
		if len(subs) == 1 {
			if subs[0].Callback != "http://localhost:"+port+"/cb" {
				t.Errorf("callback stored as %q", subs[0].Callback)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the localhost subscription was not verified")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
