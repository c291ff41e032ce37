package relay_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/internal/pgtest"
	"github.com/acrelay/acrelay/store/postgres"

	"github.com/acrelay/acrelay/canonicaljson"
	"github.com/acrelay/acrelay/correspondence"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store"
	"github.com/acrelay/acrelay/store/sqlite"
)

const operatorToken = "test-operator-token-not-a-secret"

// openTestStore opens a fresh store for one test: SQLite in a temporary
// directory, or, with ACRELAY_RELAY_TEST_STORE=postgres, a throwaway
// PostgreSQL database (pgtest), so the HTTP suite can be run against both
// dialects: ACRELAY_RELAY_TEST_STORE=postgres go test ./relay.
func openTestStore(t testing.TB) store.Store {
	t.Helper()
	var st store.Store
	var err error
	if os.Getenv("ACRELAY_RELAY_TEST_STORE") == "postgres" {
		st, err = postgres.Open(context.Background(), pgtest.FreshDatabase(t), slog.New(slog.DiscardHandler))
	} else {
		st, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	}
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// env is one relay on a fresh SQLite store behind a real HTTP server.
type env struct {
	t   *testing.T
	st  store.Store
	srv *httptest.Server
	url string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := openTestStore(t)
	var srv *httptest.Server
	// Metrics on: every HTTP test also runs through the instrumentation
	// (its ResponseWriter wrapper must keep flushes and deadlines working).
	h := relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test",
		Metrics: relay.NewMetrics(prometheus.NewRegistry())})
	srv = httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, url: srv.URL}
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not JSON (%d): %q", r.Status, r.Body)
	}
	return m
}

func (r resp) code(t *testing.T) string {
	t.Helper()
	c, _ := r.json(t)["error"].(string)
	return c
}

// do sends a request; hdr holds header pairs.
func (e *env) do(method, path, tok string, body []byte, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if body == nil {
		req.Body = nil
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

func mustStatus(t *testing.T, r resp, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d; body %s", r.Status, want, r.Body)
	}
}

// agent is a registered identity with a key and a token of its project.
type agent struct {
	ProjectID, IdentityID, KeyID, DeviceID, SessionID string
	Priv                                              ed25519.PrivateKey
	Token                                             string
	seq                                               atomic.Int64
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newProject creates a project through the admin API and returns a token
// with all scopes.
func (e *env) newProject(id string) (projectID, tok string) {
	e.t.Helper()
	body := []byte(`{}`)
	if id != "" {
		body = []byte(`{"project_id":"` + id + `"}`)
	}
	r := e.do("POST", "/v1/admin/projects", operatorToken, body)
	mustStatus(e.t, r, 201)
	projectID = r.json(e.t)["project_id"].(string)
	return projectID, e.newToken(projectID, "read", "append", "admin")
}

func (e *env) newToken(projectID string, scopes ...string) string {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"scopes": scopes})
	r := e.do("POST", "/v1/admin/projects/"+projectID+"/tokens", operatorToken, b)
	mustStatus(e.t, r, 201)
	return r.json(e.t)["token"].(string)
}

// newAgent registers an identity with a fresh key in the project.
func (e *env) newAgent(projectID, tok string) *agent {
	e.t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	r := e.do("POST", "/v1/admin/projects/"+projectID+"/identities", tok, []byte(`{"display_name":"agent"}`))
	mustStatus(e.t, r, 201)
	ident := r.json(e.t)["identity_id"].(string)
	r = e.do("POST", "/v1/admin/identities/"+ident+"/keys", tok, []byte(`{"public_key_b64url":"`+correspondence.EncodePublicKey(pub)+`"}`))
	mustStatus(e.t, r, 201)
	return &agent{ProjectID: projectID, IdentityID: ident, KeyID: r.json(e.t)["signing_key_id"].(string),
		DeviceID: newUUID(), SessionID: newUUID(), Priv: priv, Token: tok}
}

func str(s string) canonicaljson.Value { return canonicaljson.StringValue(s) }

func obj(kv ...any) canonicaljson.Value {
	v := canonicaljson.ObjectValue()
	for i := 0; i+1 < len(kv); i += 2 {
		var val canonicaljson.Value
		switch x := kv[i+1].(type) {
		case string:
			val = str(x)
		case int:
			val = canonicaljson.IntValue(int64(x))
		case canonicaljson.Value:
			val = x
		}
		v.Members = append(v.Members, canonicaljson.Member{Name: kv[i].(string), Value: val})
	}
	return v
}

// event builds and signs an event of the agent.
func (a *agent) event(repo, thread string, kind correspondence.Kind, body canonicaljson.Value, parents []string, paths ...string) *correspondence.Event {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	if parents == nil {
		parents = []string{}
	}
	ev := &correspondence.Event{
		ProjectID: a.ProjectID, RepositoryID: repo, ThreadID: thread,
		Sender: correspondence.Sender{IdentityID: a.IdentityID, SigningKeyID: a.KeyID, DeviceID: a.DeviceID, SessionID: a.SessionID},
		Kind:   kind, Parents: parents, SessionSeq: a.seq.Add(1),
		IssuedAt: correspondence.FormatTimestamp(time.Now()),
		Scope:    correspondence.Scope{Paths: paths},
		Body:     body,
	}
	if err := ev.Sign(a.Priv); err != nil {
		panic(err)
	}
	return ev
}

func (a *agent) intent(repo, summary string) *correspondence.Event {
	return a.event(repo, "thread-1", correspondence.KindIntent, obj("summary", summary), nil)
}

func eventJSON(t *testing.T, ev *correspondence.Event) []byte {
	t.Helper()
	b, err := ev.CanonicalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) post(a *agent, ev *correspondence.Event) resp {
	e.t.Helper()
	return e.do("POST", "/v1/correspondence/events", a.Token, eventJSON(e.t, ev))
}

func jsonEncode(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
