package relay_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/internal/ssrf"
	"github.com/acrelay/acrelay/relay"
)

// newHubEnv is newEnv with the embedded hub routed and running, wired as
// cmd/acrelay wires it.
func newHubEnv(t *testing.T) (*env, *hub.Hub) {
	t.Helper()
	return newHubEnvAllowing(t, "127.0.0.1")
}

// newHubEnvAllowing is newHubEnv with --websub-allow-hosts set to allow.
func newHubEnvAllowing(t *testing.T, allow ...string) (*env, *hub.Hub) {
	t.Helper()
	st := openTestStore(t)
	var srv *relay.Server
	guard, err := ssrf.NewGuard(ssrf.GuardOptions{AllowHosts: allow})
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(st, hub.Options{PublicURL: "http://relay.test", Guard: guard,
		Logger: slog.New(slog.DiscardHandler), Poll: 50 * time.Millisecond, RevokedCheck: -1,
		Authorize: func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) }})
	srv = relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", Hub: h, TokenRevoked: h.DenyRevoked})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &env{t: t, st: st, srv: hs, url: hs.URL}, h
}

func TestWebSubHubRoute(t *testing.T) {
	e, _ := newHubEnv(t)
	pid, admin := e.newProject("")
	otherPID, otherTok := e.newProject("")
	_ = otherPID
	appendOnly := e.newToken(pid, "append")
	reader := e.newToken(pid, "read")
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.URL.Query().Get("hub.challenge")))
	}))
	t.Cleanup(cb.Close)
	topic := hub.Topic{ProjectID: pid, RepositoryID: "repo-a", Format: hub.FormatAtom}.URL("http://relay.test")
	sub := url.Values{"hub.mode": {"subscribe"}, "hub.topic": {topic}, "hub.callback": {cb.URL + "/cb"}, "hub.secret": {"k"}}.Encode()
	post := func(tok string) resp {
		return e.do("POST", hub.HubPath, tok, []byte(sub), "Content-Type", "application/x-www-form-urlencoded")
	}
	for _, tc := range []struct {
		name, tok string
		status    int
		code      string
	}{
		{"no bearer", "", 401, "unauthorized"},
		{"bad bearer", "acr_nonsense", 401, "unauthorized"},
		{"operator token", operatorToken, 403, "scope_insufficient"},
		{"another project's token", otherTok, 404, "not_found"},
		{"token without read", appendOnly, 403, "scope_insufficient"},
		{"read token", reader, 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(tc.tok)
			mustStatus(t, r, tc.status)
			if tc.code != "" && r.code(t) != tc.code {
				t.Fatalf("code %s, want %s", r.code(t), tc.code)
			}
		})
	}
	mustStatus(t, e.do("GET", hub.HubPath, "", nil), http.StatusMethodNotAllowed)

	// Revoking the token through the admin API ends its subscription.
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs, err := e.st.Subscriptions(context.Background(), pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(subs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription was not verified")
		}
		time.Sleep(10 * time.Millisecond)
	}
	who := e.do("GET", "/v1/whoami", reader, nil).json(t)
	mustStatus(t, e.do("DELETE", "/v1/admin/tokens/"+who["token_id"].(string), admin, nil), http.StatusNoContent)
	if subs, _ := e.st.Subscriptions(context.Background(), pid); len(subs) != 0 {
		t.Fatalf("subscriptions after the token's revocation: %+v", subs)
	}
}

func TestWebSubHubRouteAbsentWithoutHub(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", hub.HubPath, "", []byte("hub.mode=subscribe"), "Content-Type", "application/x-www-form-urlencoded")
	mustStatus(t, r, http.StatusNotFound)
}
