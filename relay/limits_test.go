package relay_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/wire"
)

// newLimitEnv is a relay with the embedded hub, metrics and the given
// rates, on a fresh store.
func newLimitEnv(t *testing.T, limits relay.RateLimits) (*env, *prometheus.Registry) {
	t.Helper()
	st := openTestStore(t)
	reg := prometheus.NewRegistry()
	metrics := relay.NewMetrics(reg)
	var srv *relay.Server
	h := hub.New(st, hub.Options{PublicURL: "http://relay.test", Logger: slog.New(slog.DiscardHandler), RevokedCheck: -1,
		Authorize: func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) }})
	srv = relay.New(st, relay.Config{OperatorToken: operatorToken, PublicURL: "http://relay.test", Hub: h,
		Metrics: metrics, Limits: limits})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &env{t: t, st: st, srv: hs, url: hs.URL}, reg
}

// refusals reads acrelay_limit_refusals_total{limit}.
func refusals(t *testing.T, reg *prometheus.Registry, limit string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "acrelay_limit_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelOf(m, "limit") == limit {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no acrelay_limit_refusals_total{limit=%q}", limit)
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// wantRateLimited checks a rate's refusal: exactly 429, rate_limited,
// JSON, and Retry-After in whole seconds.
func wantRateLimited(t *testing.T, r resp, retryAfter string) {
	t.Helper()
	wantCode(t, r, http.StatusTooManyRequests, wire.CodeRateLimited)
	if got := r.Header.Get("Retry-After"); got != retryAfter {
		t.Fatalf("Retry-After %q, want %q", got, retryAfter)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", ct)
	}
}

// TestClientRate: each route that needs no token takes from the client
// address's bucket (0.5/s, burst 2): the third request is 429 with
// Retry-After 2 and counted; a token's reads are not limited by it.
func TestClientRate(t *testing.T) {
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name string
		send func(e *env, pub, tok string) resp
		// first is the status of the requests within the burst.
		first int
	}{
		{"websub hub", func(e *env, pub, _ string) resp {
			return e.do("POST", hub.HubPath, "", []byte("hub.mode=subscribe"), "Content-Type", form)
		}, 400},
		{"feed capability", func(e *env, _, _ string) resp {
			return e.do("GET", "/v1/feeds/acrf_nosuchcapability.atom", "", nil)
		}, 404},
		{"public read", func(e *env, pub, _ string) resp {
			return e.do("GET", "/v1/correspondence/events.atom?repository_id=repo&project_id="+pub, "", nil)
		}, 200},
		{"public claims", func(e *env, pub, _ string) resp {
			return e.do("GET", "/v1/correspondence/claims?repository_id=repo&project_id="+pub, "", nil)
		}, 200},
		{"refused bearer", func(e *env, _, _ string) resp {
			return e.do("GET", "/v1/correspondence/events?repository_id=repo", "acr_not_a_token", nil)
		}, 401},
		{"record page under a capability", func(e *env, _, _ string) resp {
			return e.do("GET", "/v1/feeds/acrf_nosuchcapability/records/1", "", nil)
		}, 404},
		{"public record page", func(e *env, pub, _ string) resp {
			return e.do("GET", "/ui/projects/"+pub+"/records/1.html?repository_id=repo", "", nil)
		}, 404},
		{"web view sign-in", func(e *env, _, _ string) resp {
			return e.do("POST", "/ui/signin", "", []byte("token=x"), "Content-Type", form)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, reg := newLimitEnv(t, relay.RateLimits{ClientRate: 0.5, ClientBurst: 2})
			pub, tok := e.newProjectVisible("public")
			for i := range 2 {
				r := tc.send(e, pub, tok)
				if r.Status == http.StatusTooManyRequests || (tc.first != 0 && r.Status != tc.first) {
					t.Fatalf("request %d: status %d, want %d; body %s", i+1, r.Status, tc.first, r.Body)
				}
			}
			wantRateLimited(t, tc.send(e, pub, tok), "2")
			if got := refusals(t, reg, "client_rate"); got != 1 {
				t.Fatalf("client_rate refusals %v, want 1", got)
			}
			// The same address with a token reads on.
			for range 3 {
				mustStatus(t, e.do("GET", "/v1/correspondence/events?repository_id=repo", tok, nil), 200)
			}
			if got := refusals(t, reg, "token_rate"); got != 0 {
				t.Fatalf("token_rate refusals %v, want 0", got)
			}
		})
	}
}

// TestTokenWriteRate: one token's writes take from its own bucket; its
// reads and another token's writes do not.
func TestTokenWriteRate(t *testing.T) {
	e, reg := newLimitEnv(t, relay.RateLimits{TokenWriteRate: 0.001, TokenWriteBurst: 3}) // the operator's setup takes 2
	pid, tok := e.newProject("")
	other := e.newToken(pid, "read")
	for i := range 3 {
		mustStatus(t, e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo-`+string(rune('a'+i))+`"}`)), 201)
	}
	wantRateLimited(t, e.do("POST", "/v1/feeds", tok, []byte(`{"repository_id":"repo"}`)), "1000")
	mustStatus(t, e.do("GET", "/v1/correspondence/events?repository_id=repo", tok, nil), 200)
	mustStatus(t, e.do("POST", "/v1/feeds", other, []byte(`{"repository_id":"repo"}`)), 201)
	if got := refusals(t, reg, "token_rate"); got != 1 {
		t.Fatalf("token_rate refusals %v, want 1", got)
	}
	if got := refusals(t, reg, "client_rate"); got != 0 {
		t.Fatalf("client_rate refusals %v, want 0", got)
	}
}

// TestTrustedProxies: behind a trusted proxy each X-Forwarded-For client
// has its own bucket; without one the header is ignored (a client cannot
// pick its own bucket by sending it).
func TestTrustedProxies(t *testing.T) {
	read := func(e *env, pub, xff string) resp {
		return e.do("GET", "/v1/correspondence/events.json?repository_id=repo&project_id="+pub, "", nil, "X-Forwarded-For", xff)
	}
	t.Run("trusted", func(t *testing.T) {
		e, _ := newLimitEnv(t, relay.RateLimits{ClientRate: 0.001, ClientBurst: 1,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
		pub, _ := e.newProjectVisible("public")
		mustStatus(t, read(e, pub, "198.51.100.7"), 200)
		wantRateLimited(t, read(e, pub, "198.51.100.7"), "1000")
		mustStatus(t, read(e, pub, "198.51.100.8"), 200)
		// The client's own entries left of the last untrusted hop change nothing.
		wantRateLimited(t, read(e, pub, "203.0.113.1, 198.51.100.8"), "1000")
		mustStatus(t, read(e, pub, "2001:db8:1:2::1"), 200)
		wantRateLimited(t, read(e, pub, "2001:db8:1:2::ffff"), "1000") // the same /64
	})
	t.Run("not trusted", func(t *testing.T) {
		e, _ := newLimitEnv(t, relay.RateLimits{ClientRate: 0.001, ClientBurst: 1})
		pub, _ := e.newProjectVisible("public")
		mustStatus(t, read(e, pub, "198.51.100.7"), 200)
		wantRateLimited(t, read(e, pub, "198.51.100.8"), "1000")
	})
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := relay.ParseTrustedProxies([]string{"10.0.0.0/8", " 192.168.1.7 ", "::ffff:10.1.2.3", "2001:db8::/32", "10.9.9.9/8", ""})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, p := range got {
		s = append(s, p.String())
	}
	if want := "10.0.0.0/8 192.168.1.7/32 10.1.2.3/32 2001:db8::/32 10.0.0.0/8"; strings.Join(s, " ") != want {
		t.Fatalf("got %v, want %s", s, want)
	}
	if _, err := relay.ParseTrustedProxies([]string{"10.0.0.0/8", "proxy.example"}); err == nil ||
		err.Error() != `"proxy.example" is neither an address nor a CIDR prefix` {
		t.Fatalf("err = %v", err)
	}
}

// relayNoLimits turns every rate off (tests that are not about them).
var relayNoLimits = relay.RateLimits{}
