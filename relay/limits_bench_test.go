package relay_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/acrelay/acrelay/hub"
	"github.com/acrelay/acrelay/relay"
	"github.com/acrelay/acrelay/store/sqlite"
)

// BenchmarkFloodRefusal measures, in process, what one subscribe request
// of a flood costs the relay once its client address is over its rate
// (429 rate_limited), against the bound of the same run: the relay's JSON
// 404 for an unknown path, which goes through the same router,
// instrumentation and error writer and reads nothing. Compare the two
// ns/op (`go test -run '^$' -bench FloodRefusal ./relay`).
func BenchmarkFloodRefusal(b *testing.B) {
	st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var srv *relay.Server
	h := hub.New(st, hub.Options{PublicURL: "http://relay.test", RevokedCheck: -1,
		Authorize: func(r *http.Request, projectID string) (string, bool, error) { return srv.AuthorizeTopic(r, projectID) }})
	srv = relay.New(st, relay.Config{PublicURL: "http://relay.test", Hub: h, Metrics: relay.NewMetrics(prometheus.NewRegistry()),
		Limits: relay.RateLimits{ClientRate: 1e-9, ClientBurst: 1}})
	handler := srv.Handler()
	form := "hub.mode=subscribe&hub.topic=" + strings.Repeat("x", 120) + "&hub.callback=http%3A%2F%2F127.0.0.1%3A9%2Fcb%2F1"
	serve := func(method, path string) int {
		r := httptest.NewRequest(method, path, strings.NewReader(form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.RemoteAddr = "192.0.2.1:4000"
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, r)
		return w.Code
	}
	serve(http.MethodPost, hub.HubPath) // the burst's one request
	run := func(b *testing.B, method, path string, want int) {
		b.ReportAllocs()
		for b.Loop() {
			if got := serve(method, path); got != want {
				b.Fatalf("status %d, want %d", got, want)
			}
		}
	}
	b.Run("429 hub request over the rate", func(b *testing.B) { run(b, http.MethodPost, hub.HubPath, http.StatusTooManyRequests) })
	b.Run("404 bound", func(b *testing.B) { run(b, http.MethodPost, "/no/such/route", http.StatusNotFound) })
}
