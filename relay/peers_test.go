package relay_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
)

// TestPeerAdminRoutes: POST, GET and DELETE
// /v1/admin/projects/{project_id}/peers answer as README documents: the
// 201 shape with the token redacted, the 400s, 409 for a second link to
// the same remote, 404 for another project's admin token or peer id, 403
// without the admin scope; and the remote token appears in no response and
// no log line (debug level).
func TestPeerAdminRoutes(t *testing.T) {
	st := openTestStore(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", Logger: log,
		Metrics: relay.NewMetrics(prometheus.NewRegistry())})
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	e := &env{t: t, st: st, srv: srv, url: srv.URL}
	pid, tok := e.newProject("")
	other, otherTok := e.newProject("")
	const secret = "acr_remote-read-token-SECRET-4711"
	var seen []resp // every answer, checked for the token at the end
	do := func(method, path, tok string, body []byte) resp {
		t.Helper()
		r := e.do(method, path, tok, body)
		seen = append(seen, r)
		return r
	}
	peers := "/v1/admin/projects/" + pid + "/peers"
	body := func(remote, token string, extra ...string) []byte {
		s := fmt.Sprintf(`{"remote_url":%q,"token":%q`, remote, token)
		for _, x := range extra {
			s += "," + x
		}
		return []byte(s + "}")
	}

	// 201: the project's admin token, and the operator.
	r := do("POST", peers, tok, body("https://relay-b.example.org/", secret))
	mustStatus(t, r, 201)
	m := r.json(t)
	if !correspondence.ValidUUID(fmt.Sprint(m["peer_id"])) || m["project_id"] != pid || m["remote_url"] != "https://relay-b.example.org" ||
		m["repository_id"] != nil || m["token"] != "[redacted]" || m["created_at"] == nil {
		t.Errorf("201 body %s", r.Body)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	first := m["peer_id"].(string)
	r = do("POST", peers, operatorToken, body("https://relay-c.example.org", secret, `"repository_id":"repo:web"`))
	mustStatus(t, r, 201)
	if r.json(t)["repository_id"] != "repo:web" {
		t.Errorf("repository_id %s", r.Body)
	}
	second := r.json(t)["peer_id"].(string)
	r = do("POST", "/v1/admin/projects/"+other+"/peers", otherTok, body("https://relay-b.example.org", secret))
	mustStatus(t, r, 201)
	othersPeer := r.json(t)["peer_id"].(string)

	for _, tc := range []struct {
		name   string
		tok    string
		body   []byte
		status int
		code   string
	}{
		{"same remote again", tok, body("https://relay-b.example.org", secret), 409, "already_exists"},
		{"not http", tok, body("ftp://relay-b.example.org", secret), 400, "remote_url_invalid"},
		{"relative", tok, body("relay-b.example.org", secret), 400, "remote_url_invalid"},
		{"userinfo", tok, body("https://u:p@relay-b.example.org", secret), 400, "remote_url_invalid"},
		{"query", tok, body("https://relay-b.example.org/?x=1", secret), 400, "remote_url_invalid"},
		{"fragment", tok, body("https://relay-b.example.org/#f", secret), 400, "remote_url_invalid"},
		{"no token", tok, []byte(`{"remote_url":"https://relay-d.example.org"}`), 400, "token_required"},
		{"blank token", tok, body("https://relay-d.example.org", "   "), 400, "token_required"},
		{"bad repository id", tok, body("https://relay-d.example.org", secret, `"repository_id":"a b"`), 400, "repository_id_invalid"},
		{"empty repository id", tok, body("https://relay-d.example.org", secret, `"repository_id":""`), 400, "repository_id_invalid"},
		{"unknown member", tok, body("https://relay-d.example.org", secret, `"tokn":"x"`), 400, "body_invalid"},
		{"not JSON", tok, []byte(`{"remote_url":`), 400, "invalid_json"},
		{"another project's admin", otherTok, body("https://relay-d.example.org", secret), 404, "not_found"},
		{"no admin scope", e.newToken(pid, "read", "append"), body("https://relay-d.example.org", secret), 403, "scope_insufficient"},
		{"no token at all", "", body("https://relay-d.example.org", secret), 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do("POST", peers, tc.tok, tc.body)
			if r.Status != tc.status || (tc.code != "" && r.code(t) != tc.code) {
				t.Errorf("%d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
		})
	}
	if ps, err := st.Peers(e.t.Context(), pid); err != nil || len(ps) != 2 {
		t.Fatalf("stored peers of the project: %d %v, want the two made", len(ps), err)
	}

	// List: both links, tokens redacted; not for another project's admin
	// or a token without the admin scope.
	r = do("GET", peers, tok, nil)
	mustStatus(t, r, 200)
	var list struct {
		Peers []map[string]any `json:"peers"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Peers) != 2 {
		t.Fatalf("list %s", r.Body)
	}
	for _, p := range list.Peers {
		if p["token"] != "[redacted]" || (p["peer_id"] != first && p["peer_id"] != second) {
			t.Errorf("listed %v", p)
		}
	}
	if r := do("GET", peers, otherTok, nil); r.Status != 404 {
		t.Errorf("list with another project's admin token: %d %s", r.Status, r.Body)
	}
	if r := do("GET", peers, e.newToken(pid, "read"), nil); r.Status != 403 {
		t.Errorf("list with a read token: %d %s", r.Status, r.Body)
	}
	if r := do("GET", peers+"?after=x", tok, nil); r.Status != 400 || r.code(t) != "query_invalid" {
		t.Errorf("list with a query: %d %s", r.Status, r.Body)
	}

	// Delete: unknown and other project's peer ids are 404 (the other
	// project's link stays), another project's admin token is 404.
	for _, tc := range []struct{ name, tok, peer string }{
		{"unknown peer", tok, newUUID()},
		{"another project's peer", tok, othersPeer},
		{"another project's admin", otherTok, first},
	} {
		if r := do("DELETE", peers+"/"+tc.peer, tc.tok, nil); r.Status != 404 {
			t.Errorf("%s: %d %s, want 404", tc.name, r.Status, r.Body)
		}
	}
	if r := do("DELETE", peers+"/"+first, e.newToken(pid, "read", "append"), nil); r.Status != 403 {
		t.Errorf("delete without admin: %d %s", r.Status, r.Body)
	}
	mustStatus(t, do("DELETE", peers+"/"+first, tok, nil), 204)
	mustStatus(t, do("DELETE", peers+"/"+first, tok, nil), 404)
	r = do("GET", peers, tok, nil)
	if err := json.Unmarshal(r.Body, &list); err != nil || len(list.Peers) != 1 || list.Peers[0]["peer_id"] != second {
		t.Errorf("after delete: %s", r.Body)
	}
	if ps, err := st.Peers(e.t.Context(), other); err != nil || len(ps) != 1 {
		t.Errorf("the other project's link: %v %v", ps, err)
	}

	for _, r := range seen {
		if bytes.Contains(r.Body, []byte(secret)) || strings.Contains(fmt.Sprint(r.Header), secret) {
			t.Errorf("an answer shows the remote token: %d %s", r.Status, r.Body)
		}
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("a log line shows the remote token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "peer link added") {
		t.Errorf("the logger was not captured:\n%s", logs.String())
	}
}
