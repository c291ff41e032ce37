package relay_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/acrelay/acrelay/relay"
)

// lockedBuffer is a log destination the server's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// take returns the JSON log lines written so far and forgets them.
func (l *lockedBuffer) take(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines = append(lines, m)
	}
	l.b.Reset()
	return lines
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newLoggedEnv is newEnv with the relay logging JSON at Debug into logs.
func newLoggedEnv(t *testing.T) (*env, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	st := openTestStore(t)
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", Logger: logger}).Handler())
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, srv: srv, url: srv.URL}, logs
}

// TestRefusalsAreLogged: a refused request (4xx) leaves one log line with
// method, route template, status and code: Info for 401 and 403, Debug for
// the rest; never the token, the body, the query or a feed capability.
// The 403 scope_insufficient message names the scope the route needs.
func TestRefusalsAreLogged(t *testing.T) {
	e, logs := newLoggedEnv(t)
	pid, admin := e.newProject("")
	readTok := e.newToken(pid, "read")
	appendTok := e.newToken(pid, "append")
	badTok := "acr_aaaaaaaaaaaaaaaaaaaaaaaaaa_" + strings.Repeat("Z", 43)
	const capability = "feedcapabilitynotasecretbutsecretlike0123456789"
	logs.take(t) // the set-up's own lines

	for _, tc := range []struct {
		name, method, path, tok string
		body                    []byte
		status                  int
		code, message           string
		level, route            string
	}{
		{name: "needs append", method: "POST", path: "/v1/correspondence/events", tok: readTok, body: []byte(`{"body_marker_xyz":1}`),
			status: 403, code: "scope_insufficient", message: "this request needs the append scope", level: "INFO", route: "/v1/correspondence/events"},
		{name: "needs read", method: "GET", path: "/v1/handoffs", tok: appendTok,
			status: 403, code: "scope_insufficient", message: "this request needs the read scope", level: "INFO", route: "/v1/handoffs"},
		{name: "needs admin", method: "GET", path: "/v1/admin/projects/" + pid + "/tokens", tok: readTok,
			status: 403, code: "scope_insufficient", message: "this request needs the admin scope", level: "INFO", route: "/v1/admin/projects/{project_id}/tokens"},
		{name: "bad token", method: "GET", path: "/v1/whoami", tok: badTok,
			status: 401, code: "unauthorized", level: "INFO", route: "/v1/whoami"},
		{name: "unknown feed capability", method: "GET", path: "/v1/feeds/" + capability + ".atom",
			status: 404, code: "not_found", level: "DEBUG", route: "/v1/feeds/{feed_token}.atom"},
		{name: "bad query", method: "GET", path: "/v1/correspondence/events?repository_id=query_marker_xyz&limit=0", tok: admin,
			status: 400, code: "limit_invalid", level: "DEBUG", route: "/v1/correspondence/events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.tok, tc.body)
			wantError(t, r, tc.status, tc.code)
			if tc.message != "" {
				if got := r.json(t)["message"]; got != tc.message {
					t.Fatalf("message %q, want %q", got, tc.message)
				}
			}
			raw := logs.String()
			for _, secret := range []string{readTok, appendTok, badTok, strings.Repeat("Z", 43), admin, capability, "body_marker_xyz", "query_marker_xyz"} {
				if strings.Contains(raw, secret) {
					t.Fatalf("the log carries %.20q…: %s", secret, raw)
				}
			}
			var refused []map[string]any
			for _, l := range logs.take(t) {
				if l["msg"] == "request refused" {
					refused = append(refused, l)
				}
			}
			if len(refused) != 1 {
				t.Fatalf("%d refusal lines, want 1: %v", len(refused), refused)
			}
			l := refused[0]
			if l["level"] != tc.level || l["method"] != tc.method || l["path"] != tc.route || l["status"] != float64(tc.status) || l["code"] != tc.code {
				t.Fatalf("logged %v, want level %s %s %s %d %s", l, tc.level, tc.method, tc.route, tc.status, tc.code)
			}
			if tc.status == 403 && (l["token_id"] == nil || l["project_id"] != pid) {
				t.Fatalf("a 403 does not name the token and project: %v", l)
			}
		})
	}

	// Answers that are not refusals log nothing of the kind.
	mustStatus(t, e.do("GET", "/v1/whoami", admin, nil), 200)
	for _, l := range logs.take(t) {
		if l["msg"] == "request refused" {
			t.Fatalf("a 200 was logged as refused: %v", l)
		}
	}
}
