package relay_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
)

// failingHealth is a real store whose Health reports a failure, as the
// SQLite store's does while its WAL checkpoint fails (that path is tested
// with an injected sync failure in store/sqlite).
type failingHealth struct {
	store.Store
	err error
}

func (f failingHealth) Health(context.Context) error { return f.err }

// TestHealthz: 200 "ok" on a healthy store; 503 unavailable, with the
// cause kept out of the body and headers, when the store reports itself
// unhealthy, and appends still work meanwhile.
func TestHealthz(t *testing.T) {
	e := newEnv(t)
	r := e.do("GET", "/healthz", "", nil)
	mustStatus(t, r, http.StatusOK)
	if string(r.Body) != "ok\n" {
		t.Fatalf("body %q, want %q", r.Body, "ok\n")
	}

	cause := errors.New("checkpoint failed: /var/lib/acrelay-secret-path: input/output error")
	srv := httptest.NewServer(relay.New(failingHealth{Store: e.st, err: cause}, relay.Config{OperatorToken: operatorToken}).Handler())
	t.Cleanup(srv.Close)
	e2 := &env{t: t, st: e.st, srv: srv, url: srv.URL}
	for _, method := range []string{"GET", "HEAD"} {
		r = e2.do(method, "/healthz", "", nil)
		mustStatus(t, r, http.StatusServiceUnavailable)
		if method == "GET" && r.code(t) != "unavailable" {
			t.Fatalf("error code %q, want unavailable", r.code(t))
		}
		for k, v := range r.Header {
			for _, s := range v {
				if bytes.Contains([]byte(k+s), []byte("secret-path")) {
					t.Fatalf("header %s: %s echoes the cause", k, s)
				}
			}
		}
		if bytes.Contains(r.Body, []byte("secret-path")) || bytes.Contains(r.Body, []byte("input/output")) {
			t.Fatalf("body echoes the cause: %s", r.Body)
		}
	}
	a := e2.newAgent(e2.newProject(""))
	mustStatus(t, e2.post(a, a.intent("repo:x", "still appending")), http.StatusCreated)
}

// TestUncleanPathsAreNotFound: a path with dot segments, doubled slashes
// or an encoded slash gets the JSON 404, with or without a token, never a
// redirect to its clean form.
func TestUncleanPathsAreNotFound(t *testing.T) {
	e := newEnv(t)
	pid, tok := e.newProject("")
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/handoffs/..%2F..%2Fhealthz"},
		{"POST", "/v1/admin/projects/..%2F" + pid + "/identities"},
		{"GET", "/v1//whoami"},
		{"GET", "/v1/correspondence/./events"},
		{"GET", "/v1/correspondence/events/../events"},
		{"GET", "/v1%2Fwhoami"},
		{"GET", "/v1%2fadmin/projects/" + pid + "/tokens"},
		{"GET", "/v1/admin/projects/" + pid + "%2Ftokens"},
	} {
		for _, token := range []string{"", tok} {
			r := e.do(tc.method, tc.path, token, nil)
			if r.Status != http.StatusNotFound || r.code(t) != "not_found" || r.Header.Get("Location") != "" {
				t.Errorf("%s %s (token %v): %d %q Location %q; want 404 not_found, no Location", tc.method, tc.path, token != "", r.Status, r.Body, r.Header.Get("Location"))
			}
		}
	}
}
