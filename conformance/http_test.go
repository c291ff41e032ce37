package conformance_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acrelay/acrelay/conformance"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

const operatorToken = "conformance-test-operator-token-not-a-secret"

// newRelay starts a real relay on a fresh SQLite store; wrap, when not
// nil, sits between the HTTP server and the relay's handler.
func newRelay(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "acrelay.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	h := relay.New(st, relay.Config{OperatorToken: operatorToken}).Handler()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// adminToken creates a project through the operator token and returns a
// token of that project with only the given scopes.
func adminToken(t *testing.T, base string, scopes ...string) string {
	t.Helper()
	post := func(path, body string) map[string]any {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	project := post("/v1/admin/projects", "{}")["project_id"].(string)
	sc, _ := json.Marshal(map[string][]string{"scopes": scopes})
	return post("/v1/admin/projects/"+project+"/tokens", string(sc))["token"].(string)
}

type groupCounts struct {
	name           string
	passed, failed int
}

func countsOf(r conformance.Report) []groupCounts {
	out := make([]groupCounts, len(r.Groups))
	for i, g := range r.Groups {
		out[i] = groupCounts{g.Title(), g.Passed, g.Failed}
	}
	return out
}

// wantHTTP is the outcome of the suite against a conforming relay.
var wantHTTP = []groupCounts{
	{"http setup", 5, 0},
	{"http body_matrix", 21, 0},
	{"http retry", 6, 0},
	{"http refusals", 30, 0},
	{"http events_read", 6, 0},
	{"http validators", 7, 0},
	{"http paging", 8, 0},
	{"http negotiation", 11, 0},
	{"http claims", 10, 0},
	{"http voice", 5, 0},
	{"http lifecycle", 4, 0},
}

func failures(r conformance.Report) string {
	var b strings.Builder
	for _, g := range r.Groups {
		for _, f := range g.Failures {
			b.WriteString(g.Title() + ": " + f + "\n")
		}
	}
	return b.String()
}

func TestRunHTTP(t *testing.T) {
	base := newRelay(t, nil)
	tok := adminToken(t, base, "admin")
	r := conformance.RunHTTP(context.Background(), base, tok)
	got := countsOf(r)
	if len(got) != len(wantHTTP) {
		t.Fatalf("groups %v\nfailures:\n%s", got, failures(r))
	}
	for i := range got {
		if got[i] != wantHTTP[i] {
			t.Errorf("group %v, want %v", got[i], wantHTTP[i])
		}
	}
	if r.Failed() != 0 {
		t.Errorf("failures:\n%s", failures(r))
	}
	// A second run in the same project works in fresh repositories.
	if r2 := conformance.RunHTTP(context.Background(), base, tok); r2.Failed() != 0 {
		t.Errorf("second run failures:\n%s", failures(r2))
	}
}

// TestRunHTTPDetects points the suite at relays that break one rule each
// and checks the break is reported where it belongs.
func TestRunHTTPDetects(t *testing.T) {
	cases := []struct {
		name   string
		wrap   func(http.Handler) http.Handler
		group  string
		prefix string
	}{
		{
			name: "Vary dropped",
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					next.ServeHTTP(dropHeader{ResponseWriter: w, name: "Vary"}, r)
				})
			},
			group:  "http events_read",
			prefix: `headers: the Vary header is "", want Accept and Authorization`,
		},
		{
			name: "retry answered 201",
			wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					next.ServeHTTP(statusRewrite{ResponseWriter: w, from: 200, to: 201, method: r.Method}, r)
				})
			},
			group:  "http retry",
			prefix: "exact retry answers 200 with the original receipt: status 201",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := newRelay(t, tc.wrap)
			r := conformance.RunHTTP(context.Background(), base, adminToken(t, base, "admin"))
			if r.Failed() == 0 {
				t.Fatal("no failure reported")
			}
			found := false
			for _, g := range r.Groups {
				if g.Title() == tc.group {
					for _, f := range g.Failures {
						found = found || strings.HasPrefix(f, tc.prefix)
					}
				}
			}
			if !found {
				t.Errorf("no %s failure starting %q; failures:\n%s", tc.group, tc.prefix, failures(r))
			}
		})
	}
}

func TestRunHTTPSetup(t *testing.T) {
	base := newRelay(t, nil)
	for _, tc := range []struct {
		name, base, token, prefix string
	}{
		{"token without admin scope", base, adminToken(t, base, "read", "append"), "whoami: the token is not a project token with the admin scope"},
		{"unknown token", base, "not-a-token", "whoami: status 401 (unauthorized), want 200"},
		{"unreachable", "http://127.0.0.1:1", "x", "GET /v1/whoami: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := conformance.RunHTTP(context.Background(), tc.base, tc.token)
			if len(r.Groups) != 1 || r.Groups[0].Name != "setup" || r.Groups[0].Failed != 1 ||
				!strings.HasPrefix(r.Groups[0].Failures[0], tc.prefix) {
				t.Errorf("report %v: %q", countsOf(r), failures(r))
			}
			if strings.Contains(failures(r), tc.token) && tc.token != "x" {
				t.Error("a failure line quotes the token")
			}
		})
	}
}

// dropHeader removes one response header before it is written.
type dropHeader struct {
	http.ResponseWriter
	name string
}

func (d dropHeader) WriteHeader(code int) {
	d.Header().Del(d.name)
	d.ResponseWriter.WriteHeader(code)
}

func (d dropHeader) Write(b []byte) (int, error) {
	d.Header().Del(d.name)
	return d.ResponseWriter.Write(b)
}

// statusRewrite answers POSTs with status to instead of from.
type statusRewrite struct {
	http.ResponseWriter
	from, to int
	method   string
}

func (s statusRewrite) WriteHeader(code int) {
	if s.method == "POST" && code == s.from {
		code = s.to
	}
	s.ResponseWriter.WriteHeader(code)
}
